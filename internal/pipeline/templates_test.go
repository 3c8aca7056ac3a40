package pipeline_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/capability"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/worker"
)

// template is a site made the way a real generator's starter makes it (its .gitignore, its
// package.json or config, its output folder; the pages are our own), in testdata/templates —
// but astro-minimal, which is the demo's Astro site (internal/demo/astro, embedded in the
// binary for `bench --only owner`), kept in one place.
type template struct {
	name string
	page string           // the file the owner's edits change
	path string           // where that page is served
	tool *capability.Part // what the site's install and build need (nil: nothing)
	out  string           // the build output folder, never committed
}

var templates = []template{
	{name: "astro-minimal", page: "src/pages/index.astro", path: "/", tool: capability.Node, out: "dist"},
	{name: "astro-blog", page: "src/content/blog/sourdough.md", path: "/blog/sourdough/", tool: capability.Node, out: "dist"},
	{name: "eleventy", page: "index.md", path: "/", tool: capability.Node, out: "_site"},
	{name: "hugo", page: "content/_index.md", path: "/", tool: capability.Hugo, out: "public"},
	{name: "plain", page: "index.html", path: "/", out: "."},
}

// nodeGet is how to get Node.js 20 or newer with npm (Debian bookworm's nodejs 18.19 is too
// old for Astro 5).

// editSpecial is the agent: a command that sets the page's "Special: ..." line to the
// owner's instruction.
func editSpecial(page string) string {
	return `sed -i "s|Special: [A-Za-z]*|Special: $WO_INSTRUCTION|" ` + page
}

// templateFiles reads a template's files (path → content).
func templateFiles(t *testing.T, name string) map[string]string {
	t.Helper()
	root := filepath.Join("testdata", "templates", name)
	if name == "astro-minimal" {
		root = filepath.Join("..", "demo", "astro")
	}
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		files[rel] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestRealTemplates: each real template, in the sandbox as the job's user, runs three
// consecutive jobs on one thread and a publish, all done, each serving the owner's edit, then
// a second tenant's first job (its install from the shared packages); the build output,
// node_modules and what the generators leave behind are never committed. The time of each
// job and of the publish is logged (go test -v).
func TestRealTemplates(t *testing.T) {
	t.Parallel()
	for _, tp := range templates {
		t.Run(tp.name, func(t *testing.T) {
			if tp.tool != nil {
				capability.Need(t, tp.tool)
			}
			runTemplate(t, tp)
		})
	}
}

func runTemplate(t *testing.T, tp template) {
	f := setupConfig(t, templateFiles(t, tp.name), func(p *project.Project) {
		p.Agent = project.AgentSpec{Kind: "command", Command: editSpecial(tp.page)}
		p.Env = []string{"ASTRO_TELEMETRY_DISABLED=1"}
	}, sharedPackages(t, new(string)))
	var preview string
	for i, word := range []string{"Wheat", "Spelt", "Barley"} {
		start := time.Now()
		out, err := f.runFor(task("t1", word), 10*time.Minute)
		if err != nil {
			t.Fatalf("job %d: %v\n%+v", i+1, err, out.Report)
		}
		t.Logf("%s job %d: %v (stages ms %v)", tp.name, i+1, time.Since(start).Round(time.Millisecond), out.Report.StagesMs)
		if len(out.Report.PreviewURLs) == 0 {
			t.Fatalf("job %d has no preview", i+1)
		}
		preview = out.Report.PreviewURLs[0]
		if code, body := f.page(preview, tp.path); code != 200 || !strings.Contains(body, "Special: "+word) {
			t.Fatalf("job %d: preview %s%s: %d %q", i+1, preview, tp.path, code, body)
		}
	}
	start := time.Now()
	out, err := f.runFor(action("t1", jobspec.ActionPublish, "publish"), 10*time.Minute)
	if err != nil {
		t.Fatalf("publish: %v %+v", err, out)
	}
	t.Logf("%s publish: %v (stages ms %v)", tp.name, time.Since(start).Round(time.Millisecond), out.Report.StagesMs)
	if code, body := f.page(out.Report.LiveURL, tp.path); code != 200 || !strings.Contains(body, "Special: Barley") {
		t.Fatalf("live site %s%s: %d %q", out.Report.LiveURL, tp.path, code, body)
	}
	// A second tenant's first job: a new site whose lockfile the shared packages hold.
	start = time.Now()
	out, err = f.runFor(taskAs("bob", "t2", "Oat"), 10*time.Minute)
	if err != nil {
		t.Fatalf("second tenant's first job: %v\n%+v", err, out.Report)
	}
	t.Logf("%s second tenant's first job: %v (stages ms %v)", tp.name, time.Since(start).Round(time.Millisecond), out.Report.StagesMs)
	if code, body := f.page(out.Report.PreviewURLs[0], tp.path); code != 200 || !strings.Contains(body, "Special: Oat") {
		t.Fatalf("second tenant's preview: %d %q", code, body)
	}
	tree := git(t, f.origin, "ls-tree", "-r", "--name-only", "main")
	for _, name := range strings.Split(tree, "\n") {
		top := strings.SplitN(name, "/", 2)[0]
		if (tp.out != "." && top == tp.out) || top == "node_modules" || top == ".astro" || top == ".hugo_build.lock" || top == "resources" {
			t.Fatalf("main holds %s, which the build wrote:\n%s", name, tree)
		}
	}
}

// runFor processes tk with a deadline of d (a real install and build takes longer than a
// test agent's edit).
func (f *fixture) runFor(tk worker.Task, d time.Duration) (worker.Outcome, error) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return f.p.Process(ctx, tk)
}
