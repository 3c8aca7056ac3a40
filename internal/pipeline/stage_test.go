package pipeline_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// astroSite ignores its build output and dependencies, as Astro's template does.
var astroSite = map[string]string{
	".gitignore":   "# build output\ndist/\n# dependencies\nnode_modules/\n",
	"package.json": `{"name":"s","version":"1.0.0","scripts":{"build":"sh build.sh"}}`,
	"build.sh":     "mkdir -p dist && cp index.html dist/\n",
	"index.html":   "<h1>Hello</h1>\n",
}

// TestEveryJobOfASiteThatIgnoresItsBuildOutputWorks: the build's dist/, which .gitignore
// ignores, stays in the workspace between jobs; later jobs still stage and commit.
func TestEveryJobOfASiteThatIgnoresItsBuildOutputWorks(t *testing.T) {
	t.Parallel()
	f := setup(t, astroSite, nil)
	for i, word := range []string{"One", "Two", "Three"} {
		out, err := f.run(task("t1", "replace <h1>"+[]string{"Hello", "One", "Two"}[i]+" with <h1>"+word+" in index.html"))
		if err != nil {
			t.Fatalf("job %d: %v\n%+v", i+1, err, out.Report)
		}
		if len(out.Report.LeftOut) != 0 {
			t.Errorf("job %d left out %q", i+1, out.Report.LeftOut)
		}
	}
	if tree := git(t, f.origin, "ls-tree", "-r", "--name-only", "thread-t1"); strings.Contains(tree, "dist") {
		t.Fatalf("the build output was committed: %s", tree)
	}
}

// TestJobsGitfileIsLeftOutAndNamed: a job plants a gitfile pointing at another repository
// (as it would another tenant's workspace); the commit holds no gitlink, the result names
// the directory, and the tenant's next job (whose checkout removes it) works.
func TestJobsGitfileIsLeftOutAndNamed(t *testing.T) {
	t.Parallel()
	f := setup(t, site, nil)
	other := filepath.Join(filepath.Dir(f.origin), "seed", ".git")
	want := "wt/ (a git repository inside your site)"
	out, err := f.run(task("t1", "write wt/.git: gitdir: "+other+"\nwrite wt/page.html: x\nreplace Hello with Hi in index.html"))
	if err != nil {
		t.Fatalf("job with a gitfile: %v\n%+v", err, out.Report)
	}
	if !slices.Contains(out.Report.LeftOut, want) || !strings.Contains(out.Summary, want) {
		t.Errorf("left out %q, summary %q: want %s named", out.Report.LeftOut, out.Summary, want)
	}
	if tree := git(t, f.origin, "ls-tree", "-r", "thread-t1"); strings.Contains(tree, "160000") || strings.Contains(tree, "wt") {
		t.Fatalf("the commit holds the gitfile's directory:\n%s", tree)
	}
	out, err = f.run(task("t1", "replace Hi with Hey in index.html"))
	if err != nil || len(out.Report.LeftOut) != 0 {
		t.Fatalf("the next job (its checkout removes the gitfile): %v, left out %q", err, out.Report.LeftOut)
	}
}
