package workspace_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/workspace"
)

// Jobs write the working tree (here the test writes it as the platform's user, which is
// what a job's writes amount to once the platform's git reads them) and the platform stages
// and commits it. Each test is the job trying to get something into the commit that must
// not be there, or to wedge the tenant's later jobs.

// tenant is a workspace on its own thread branch, checked out from remote.
func tenant(t *testing.T, remote, name string) *workspace.Workspace {
	t.Helper()
	ws := &workspace.Workspace{Dir: filepath.Join(t.TempDir(), "site", name), Remote: remote}
	checkout(t, ws)
	return ws
}

// checkout starts a job: sync, then the thread's branch from its head.
func checkout(t *testing.T, ws *workspace.Workspace) {
	t.Helper()
	ctx := context.Background()
	if err := ws.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ws.Checkout(ctx, "thread-x", "main"); err != nil {
		t.Fatal(err)
	}
}

// stageAndCommit is the platform's end of a job: stage (leaving out exclude), commit. It
// returns the commit and the paths left out.
func stageAndCommit(t *testing.T, ws *workspace.Workspace, exclude ...string) (string, []string) {
	t.Helper()
	ctx := context.Background()
	left, err := ws.Stage(ctx, nil, exclude)
	if err != nil {
		t.Fatalf("stage: %v", err)
	}
	sha, ok, err := ws.Commit(ctx, "edit", workspace.Author{Name: "a", Email: "a@b"}, nil)
	if err != nil || !ok {
		t.Fatalf("commit: committed=%v %v", ok, err)
	}
	var paths []string
	for _, l := range left {
		paths = append(paths, l.Path)
	}
	return sha, paths
}

// tree lists HEAD's entries as "mode path".
func tree(t *testing.T, ws *workspace.Workspace) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(run(t, ws.Dir, "git", "ls-tree", "-r", "HEAD"), "\n") {
		meta, path, _ := strings.Cut(line, "\t")
		out = append(out, strings.Fields(meta)[0]+" "+path)
	}
	return out
}

func noGitlinks(t *testing.T, ws *workspace.Workspace) {
	t.Helper()
	for _, e := range tree(t, ws) {
		if strings.HasPrefix(e, "160000 ") {
			t.Errorf("HEAD has a gitlink: %s", e)
		}
	}
}

func TestStageLeavesOutAGitfileToAnotherWorkspace(t *testing.T) {
	t.Parallel()
	remote := origin(t)
	bob := tenant(t, remote, "bob")
	write(t, filepath.Join(bob.Dir, "secret.html"), "bob's unpublished page")
	bobHead, _ := stageAndCommit(t, bob)

	alice := tenant(t, remote, "alice")
	write(t, filepath.Join(alice.Dir, "wt", ".git"), "gitdir: "+filepath.Join(bob.Dir, ".git")+"\n")
	write(t, filepath.Join(alice.Dir, "wt", "f.txt"), "x")
	write(t, filepath.Join(alice.Dir, "page.html"), "alice's edit")
	_, left := stageAndCommit(t, alice)

	noGitlinks(t, alice)
	for _, e := range tree(t, alice) {
		if strings.Contains(e, "wt") {
			t.Errorf("HEAD has %s from a directory with a gitfile", e)
		}
	}
	if !slices.Contains(left, "wt/") {
		t.Errorf("left out %q, want wt/ named", left)
	}
	if objectsMention(t, alice, bobHead) {
		t.Errorf("alice's repository holds an object naming bob's HEAD %s", bobHead)
	}
}

// objectsMention reports whether any object in ws's repository holds sha (hex or raw).
func objectsMention(t *testing.T, ws *workspace.Workspace, sha string) bool {
	t.Helper()
	cmd := exec.Command("git", "cat-file", "--batch-all-objects", "--batch", "--unordered")
	cmd.Dir = ws.Dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 0, 20)
	for i := 0; i+1 < len(sha); i += 2 {
		var b byte
		for _, c := range sha[i : i+2] {
			b = b<<4 | byte(strings.IndexRune("0123456789abcdef", c))
		}
		raw = append(raw, b)
	}
	return bytes.Contains(out, []byte(sha)) || bytes.Contains(out, raw)
}

// TestStageLeavesOutANestedRepositoryAndLaterJobsWork: `git init sub` is left out and named;
// the tenant's next checkout removes it (git clean -fd alone keeps a nested repository) and
// its jobs work.
func TestStageLeavesOutANestedRepositoryAndLaterJobsWork(t *testing.T) {
	t.Parallel()
	for _, withCommit := range []bool{false, true} {
		t.Run(map[bool]string{false: "empty", true: "with-commit"}[withCommit], func(t *testing.T) {
			t.Parallel()
			ws := tenant(t, origin(t), "alice")
			run(t, ws.Dir, "git", "init", "--quiet", "sub")
			write(t, filepath.Join(ws.Dir, "sub", "inner.txt"), "inside")
			if withCommit {
				run(t, filepath.Join(ws.Dir, "sub"), "git", "add", "-A")
				run(t, filepath.Join(ws.Dir, "sub"), "git", "-c", "user.name=j", "-c", "user.email=j@j", "commit", "--quiet", "-m", "inner")
			}
			for round := range 3 {
				if round > 0 {
					checkout(t, ws)
				}
				write(t, filepath.Join(ws.Dir, "page.html"), strings.Repeat("edit ", round+1))
				_, left := stageAndCommit(t, ws)
				if round == 0 && !slices.Contains(left, "sub/") {
					t.Errorf("round %d: left out %q, want sub/ named", round, left)
				}
				if _, err := os.Lstat(filepath.Join(ws.Dir, "sub")); round > 0 && (len(left) != 0 || err == nil) {
					t.Errorf("round %d: left out %q, sub/ there (%v): want the next checkout to have cleaned it", round, left, err)
				}
				noGitlinks(t, ws)
				for _, e := range tree(t, ws) {
					if strings.Contains(e, "sub/") || strings.HasSuffix(e, " sub") {
						t.Errorf("round %d: HEAD has %s from a nested repository", round, e)
					}
				}
			}
		})
	}
}

// astroOrigin is a remote whose site ignores its build output and node_modules, as Astro's
// template does.
func astroOrigin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bare, seed := filepath.Join(dir, "origin.git"), filepath.Join(dir, "seed")
	run(t, dir, "git", "init", "--quiet", "--bare", "--initial-branch=main", bare)
	run(t, dir, "git", "init", "--quiet", "--initial-branch=main", seed)
	write(t, filepath.Join(seed, ".gitignore"), "# build output\ndist/\n# dependencies\nnode_modules/\n.astro/\n")
	write(t, filepath.Join(seed, "src", "pages", "index.astro"), "<h1>hello</h1>")
	run(t, seed, "git", "add", "-A")
	run(t, seed, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "init")
	run(t, seed, "git", "push", "--quiet", bare, "main")
	return bare
}

func TestStageAfterBuildsIntoAnIgnoredOutputDir(t *testing.T) {
	t.Parallel()
	ws := tenant(t, astroOrigin(t), "alice")
	for round := range 3 {
		if round > 0 {
			checkout(t, ws)
		}
		write(t, filepath.Join(ws.Dir, "src", "pages", "index.astro"), strings.Repeat("<p>edit</p>", round+1))
		_, left := stageAndCommit(t, ws, "dist")
		if len(left) != 0 {
			t.Errorf("round %d: left out %q, want nothing", round, left)
		}
		// the build, after staging
		write(t, filepath.Join(ws.Dir, "dist", "index.html"), "built")
		write(t, filepath.Join(ws.Dir, "node_modules", "astro", "index.js"), "dep")
	}
	for _, e := range tree(t, ws) {
		if strings.Contains(e, "dist") || strings.Contains(e, "node_modules") {
			t.Errorf("HEAD has %s", e)
		}
	}
}

func TestStageRepairTurnPathsUnderAnIgnoredOutputDir(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ws := tenant(t, astroOrigin(t), "alice")
	write(t, filepath.Join(ws.Dir, "dist", "index.html"), "built")
	write(t, filepath.Join(ws.Dir, "src", "fix.astro"), "fix")
	if _, err := ws.Stage(ctx, []string{"src/fix.astro", "dist/index.html", "dist"}, []string{"dist"}); err != nil {
		t.Fatalf("stage: %v", err)
	}
	if _, ok, err := ws.Commit(ctx, "fix", workspace.Author{Name: "a", Email: "a@b"}, nil); err != nil || !ok {
		t.Fatalf("commit: %v %v", ok, err)
	}
	if got := tree(t, ws); !slices.Contains(got, "100644 src/fix.astro") || slices.ContainsFunc(got, func(e string) bool { return strings.Contains(e, "dist") }) {
		t.Errorf("HEAD is %q, want src/fix.astro and no dist", got)
	}
}

// TestStageSurvivesOddEntries: what a job can leave in the tree that git cannot or should not
// take never fails staging; the rest of the job's work is committed, and the odd entry is
// named.
func TestStageSurvivesOddEntries(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		plant func(t *testing.T, dir string)
		left  string // the path named as left out; "" when none need be
	}{
		{"tracked file replaced by a fifo", func(t *testing.T, dir string) {
			_ = os.Remove(filepath.Join(dir, "index.html"))
			if err := syscall.Mkfifo(filepath.Join(dir, "index.html"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "index.html"},
		{"a name git refuses", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "x", ".GIT"), "not a repository")
			write(t, filepath.Join(dir, "y", ".git."), "nor this")
		}, "x/.GIT"},
		{"a symlink as .gitattributes", func(t *testing.T, dir string) {
			if err := os.Symlink("/etc/passwd", filepath.Join(dir, ".gitattributes")); err != nil {
				t.Fatal(err)
			}
		}, ".gitattributes"},
		{"a tracked file beyond a symlinked directory", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "d", "a.html"), "a")
			run(t, dir, "git", "add", "d/a.html")
			run(t, dir, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "d")
			other := t.TempDir()
			write(t, filepath.Join(other, "a.html"), "elsewhere")
			if err := os.RemoveAll(filepath.Join(dir, "d")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other, filepath.Join(dir, "d")); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"a file bigger than hosts take", func(t *testing.T, dir string) {
			f, err := os.Create(filepath.Join(dir, "big.bin"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(workspace.MaxFileBytes + 1); err != nil {
				t.Fatal(err)
			}
		}, "big.bin"},
		{"weird bytes in a name", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "a\nb\x01\xff:(exclude)c"), "odd but fine")
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ws := tenant(t, origin(t), "alice")
			c.plant(t, ws.Dir)
			write(t, filepath.Join(ws.Dir, "good.html"), "the job's real work")
			_, left := stageAndCommit(t, ws)
			if !slices.Contains(tree(t, ws), "100644 good.html") {
				t.Errorf("HEAD is %q, want good.html committed", tree(t, ws))
			}
			if c.left != "" && !slices.Contains(left, c.left) {
				t.Errorf("left out %q, want %s named", left, c.left)
			}
			checkout(t, ws) // the next job starts cleanly
		})
	}
}

// TestStatusListsPathsNotRepositoriesOrRenames: Status (what a repair turn and the pictures
// compare) names files: never a nested repository, and a staged move as its two paths.
func TestStatusListsPathsNotRepositoriesOrRenames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	remote := origin(t)
	bob := tenant(t, remote, "bob")
	alice := tenant(t, remote, "alice")
	write(t, filepath.Join(alice.Dir, "wt", ".git"), "gitdir: "+filepath.Join(bob.Dir, ".git")+"\n")
	run(t, alice.Dir, "git", "init", "--quiet", "sub")
	if err := os.Rename(filepath.Join(alice.Dir, "index.html"), filepath.Join(alice.Dir, "home.html")); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Stage(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	got, err := alice.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{"home.html", "index.html"}; !slices.Equal(got, want) {
		t.Errorf("status %q, want %q", got, want)
	}
}

// TestStageAfterOwnershipChangeTouchesOnlyChanges: the platform gives the job the workspace
// (lchown of every entry, which makes git's stat data stale); Stage still looks only at what
// changed, so a big file already in HEAD is not named as left out.
func TestStageAfterOwnershipChangeTouchesOnlyChanges(t *testing.T) {
	t.Parallel()
	ws := tenant(t, origin(t), "alice")
	big := filepath.Join(ws.Dir, "video.bin")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(workspace.MaxFileBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	run(t, ws.Dir, "git", "add", "video.bin")
	run(t, ws.Dir, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "the owner's video")
	err = filepath.WalkDir(ws.Dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 65534, 65534)
	})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws.Dir, "index.html"), "edit")
	if _, left := stageAndCommit(t, ws); len(left) != 0 {
		t.Errorf("left out %q, want nothing (only index.html changed)", left)
	}
}

// TestFilesLeavesOutNestedRepositories: the files deployed for a site without a build are
// the job's files, never a nested repository or what a gitfile points at.
func TestFilesLeavesOutNestedRepositories(t *testing.T) {
	t.Parallel()
	remote := origin(t)
	bob := tenant(t, remote, "bob")
	alice := tenant(t, remote, "alice")
	write(t, filepath.Join(alice.Dir, "wt", ".git"), "gitdir: "+filepath.Join(bob.Dir, ".git")+"\n")
	run(t, alice.Dir, "git", "init", "--quiet", "sub")
	write(t, filepath.Join(alice.Dir, "sub", "inner.html"), "inside")
	write(t, filepath.Join(alice.Dir, "page.html"), "new page")
	got, err := alice.Files(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if slices.Sort(got); !slices.Equal(got, []string{"index.html", "page.html"}) {
		t.Errorf("files %q, want index.html and page.html", got)
	}
}

// TestAGitfileToAPipeHangsNoJob: a job points a gitfile at a directory it made to look like a
// repository whose HEAD is a pipe. Git deciding whether that directory is a repository reads
// HEAD and blocks; neither this job's staging nor the tenant's next checkout may ask it to,
// whether or not .gitignore ignores the directory.
func TestAGitfileToAPipeHangsNoJob(t *testing.T) {
	t.Parallel()
	for _, ignored := range []bool{false, true} {
		t.Run(map[bool]string{false: "tracked-dir", true: "ignored-dir"}[ignored], func(t *testing.T) {
			t.Parallel()
			ws := tenant(t, origin(t), "alice")
			fake := filepath.Join(ws.Dir, "fake")
			for _, d := range []string{"objects", "refs"} {
				if err := os.MkdirAll(filepath.Join(fake, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := syscall.Mkfifo(filepath.Join(fake, "HEAD"), 0o644); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(ws.Dir, "wt", ".git"), "gitdir: "+fake+"\n")
			if ignored {
				write(t, filepath.Join(ws.Dir, ".gitignore"), "wt/\n")
			}
			write(t, filepath.Join(ws.Dir, "page.html"), "edit")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := ws.Stage(ctx, nil, nil); err != nil {
				t.Fatalf("stage: %v", err)
			}
			if _, err := ws.Status(ctx); err != nil {
				t.Fatalf("status: %v", err)
			}
			if _, err := ws.Files(ctx); err != nil {
				t.Fatalf("files: %v", err)
			}
			if _, _, err := ws.Commit(ctx, "edit", workspace.Author{Name: "a", Email: "a@b"}, nil); err != nil {
				t.Fatalf("commit: %v", err)
			}
			if err := ws.Sync(ctx); err != nil {
				t.Fatalf("the next job's sync: %v", err)
			}
			if err := ws.Checkout(ctx, "thread-x", "main"); err != nil {
				t.Fatalf("the next job's checkout: %v", err)
			}
		})
	}
}

// TestStageKeepsTheOwnersSubmoduleAsRecorded: a gitlink already in HEAD (a submodule the
// owner recorded) keeps its commit, even when a job plants a gitfile in its directory.
func TestStageKeepsTheOwnersSubmoduleAsRecorded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bare, seed := filepath.Join(dir, "origin.git"), filepath.Join(dir, "seed")
	run(t, dir, "git", "init", "--quiet", "--bare", "--initial-branch=main", bare)
	run(t, dir, "git", "init", "--quiet", "--initial-branch=main", seed)
	write(t, filepath.Join(seed, "index.html"), "<h1>hello</h1>")
	recorded := "1111111111111111111111111111111111111111"
	run(t, seed, "git", "update-index", "--add", "--cacheinfo", "160000,"+recorded+",theme")
	run(t, seed, "git", "add", "index.html")
	run(t, seed, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "init")
	run(t, seed, "git", "push", "--quiet", bare, "main")

	bob := tenant(t, bare, "bob")
	alice := tenant(t, bare, "alice")
	write(t, filepath.Join(alice.Dir, "theme", ".git"), "gitdir: "+filepath.Join(bob.Dir, ".git")+"\n")
	write(t, filepath.Join(alice.Dir, "index.html"), "edit")
	_, left := stageAndCommit(t, alice)
	if !slices.Contains(left, "theme/") {
		t.Errorf("left out %q, want theme/ named", left)
	}
	if got := run(t, alice.Dir, "git", "rev-parse", "HEAD:theme"); got != recorded {
		t.Errorf("theme's gitlink is %s, want the recorded %s", got, recorded)
	}
}
