package pipeline_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/worker"
)

func action(thread, act, text string) worker.Task {
	tk := task(thread, text)
	ask(&tk, func(s *jobspec.Spec) { s.Action = act })
	return tk
}

// TestPublishThenUndo: publish merges the thread's branch into main, pushes it and deploys it
// to the project's live host; undo restores main's content with a new commit and redeploys.
func TestPublishThenUndo(t *testing.T) {
	t.Parallel()
	f := setup(t, site, nil)
	if _, err := f.run(task("t1", "replace Hello with Hi there in index.html")); err != nil {
		t.Fatal(err)
	}
	before := git(t, f.origin, "rev-parse", "main")
	out, err := f.run(action("t1", jobspec.ActionPublish, "publish"))
	if err != nil {
		t.Fatalf("publish: %v %+v", err, out)
	}
	r := out.Report
	if r.LiveURL != "http://site.localhost/" || r.PublishedFrom != before || r.Commit != git(t, f.origin, "rev-parse", "main") {
		t.Fatalf("publish report %+v (main was %s)", r, before)
	}
	if git(t, f.origin, "show", "main:index.html") != "<h1>Hi there</h1>" {
		t.Fatal("main does not hold the thread's change")
	}
	if code, body := f.page(r.LiveURL, "/"); code != 200 || !strings.Contains(body, "Hi there") {
		t.Fatalf("live site: %d %q", code, body)
	}
	if !strings.Contains(out.Summary, "live at http://site.localhost/") {
		t.Fatalf("summary %q", out.Summary)
	}
	again, err := f.run(action("t1", jobspec.ActionPublish, "publish"))
	if err != nil || again.Report.Commit != "" || !strings.Contains(again.Summary, "already published") {
		t.Fatalf("publishing again: %v %q %+v", err, again.Summary, again.Report)
	}

	undo, err := f.run(action("t1", jobspec.ActionUndo, "undo"))
	if err != nil {
		t.Fatalf("undo: %v %+v", err, undo)
	}
	if git(t, f.origin, "show", "main:index.html") != "<h1>Hello</h1>" || git(t, f.origin, "rev-parse", "main^") != r.Commit {
		t.Fatal("undo did not restore main's content with a new commit on top of the publish")
	}
	if _, body := f.page(r.LiveURL, "/"); !strings.Contains(body, "Hello") {
		t.Fatalf("live site after undo: %q", body)
	}
	if _, err := f.run(action("t1", jobspec.ActionUndo, "undo")); !errors.Is(err, worker.ErrPermanent) || !strings.Contains(err.Error(), "no publish") {
		t.Fatalf("second undo: %v", err)
	}
	th, _ := f.threads.Get(context.Background(), "t1")
	if len(th.Publishes) != 1 || th.Publishes[0].UndoneBy == "" {
		t.Fatalf("thread publishes %+v", th.Publishes)
	}
}

// TestUndoReusesTheBuildItRestores: a publish records what the live site served before it;
// undoing it restores that tree, so the kept preview is deployed again instead of a build.
func TestUndoReusesTheBuildItRestores(t *testing.T) {
	t.Parallel()
	f := setup(t, site, func(p *project.Project) {
		p.BuildCommand, p.OutputDir = "mkdir -p dist && cp *.html dist/", "dist"
	})
	for _, step := range []worker.Task{
		task("t1", "replace Hello with Hi there in index.html"), action("t1", jobspec.ActionPublish, "publish"),
		task("t2", "replace About us with About the bakery in about.html"), action("t2", jobspec.ActionPublish, "publish"),
	} {
		if out, err := f.run(step); err != nil {
			t.Fatalf("%s: %v %+v", step.Job.ID, err, out)
		}
	}
	undo, err := f.run(action("t2", jobspec.ActionUndo, "undo"))
	if err != nil {
		t.Fatalf("undo: %v %+v", err, undo)
	}
	stages := undo.Report.StagesMs
	if _, built := stages["build"]; built {
		t.Fatalf("undo built the tree that was live before the publish again: stages %v", stages)
	}
	if _, promoted := stages["promote"]; !promoted {
		t.Fatalf("undo did not reuse the kept build: stages %v", stages)
	}
	if _, body := f.page(undo.Report.LiveURL, "/"); !strings.Contains(body, "Hi there") {
		t.Fatalf("live site after undo: %q", body)
	}
	if _, body := f.page(undo.Report.LiveURL, "/about.html"); strings.Contains(body, "bakery") {
		t.Fatalf("live site after undo still has the undone change: %q", body)
	}
}

// resolver is a command agent that edits index.html, or, given a conflict, keeps both sides.
const resolver = `if grep -q '^<<<<<<< ' index.html; then sed -i '/^<<<<<<< /d;/^=======$/d;/^>>>>>>> /d' index.html; ` +
	`else sed -i "s|Hello|$WO_INSTRUCTION|" index.html; fi`

// TestPublishConflictIsResolvedByTheAgent: main moved on with a conflicting change; the agent
// brings the thread's branch up to date, and the publish goes through with both changes.
func TestPublishConflictIsResolvedByTheAgent(t *testing.T) {
	t.Parallel()
	f := setup(t, site, func(p *project.Project) { p.Agent = project.AgentSpec{Kind: "command", Command: resolver} })
	if _, err := f.run(task("t1", "Bonjour")); err != nil {
		t.Fatal(err)
	}
	f.pushToMain("index.html", "<h1>Howdy</h1>\n")
	out, err := f.run(action("t1", jobspec.ActionPublish, "publish"))
	if err != nil {
		t.Fatalf("publish: %v %+v", err, out)
	}
	main := git(t, f.origin, "show", "main:index.html")
	if !strings.Contains(main, "Bonjour") || !strings.Contains(main, "Howdy") || strings.Contains(main, "<<<") {
		t.Fatalf("main after the publish: %q", main)
	}
	if !strings.Contains(git(t, f.origin, "log", "--format=%s", "thread-t1"), "up to date with main") {
		t.Fatal("the thread's branch was not brought up to date")
	}
}

// TestPublishConflictThatCannotBeResolved: an agent that cannot resolve the conflict leaves
// main and the live site alone, and the owner is told plainly.
func TestPublishConflictThatCannotBeResolved(t *testing.T) {
	t.Parallel()
	f := setup(t, site, nil) // fakeclaude does nothing with the conflict prompt
	if _, err := f.run(task("t1", "replace Hello with Hi in index.html")); err != nil {
		t.Fatal(err)
	}
	f.pushToMain("index.html", "<h1>Howdy</h1>\n")
	main := git(t, f.origin, "rev-parse", "main")
	out, err := f.run(action("t1", jobspec.ActionPublish, "publish"))
	if !errors.Is(err, worker.ErrPermanent) || !strings.Contains(err.Error(), "conflict with changes made to the live site") ||
		!strings.Contains(err.Error(), "nothing was published") {
		t.Fatalf("publish: %v", err)
	}
	if git(t, f.origin, "rev-parse", "main") != main || out.Report.LiveURL != "" {
		t.Fatal("main moved or something went live")
	}
}

// pushToMain commits a change straight to the origin's main (someone else's edit).
func (f *fixture) pushToMain(name, content string) {
	f.t.Helper()
	dir := filepath.Join(f.dir, "other")
	git(f.t, f.dir, "clone", "--quiet", f.origin, dir)
	write(f.t, filepath.Join(dir, name), content)
	git(f.t, dir, "-c", "user.name=o", "-c", "user.email=o@o", "commit", "--quiet", "-am", "other change")
	git(f.t, dir, "push", "--quiet", "origin", "main")
}

// TestPublishReusesThePreview: publishing the very tree the thread's last preview was built
// from deploys that preview as the live site without building again; once the default branch
// has moved on, the merge is a new tree and is built.
func TestPublishReusesThePreview(t *testing.T) {
	t.Parallel()
	f := setup(t, site, func(p *project.Project) {
		p.BuildCommand, p.OutputDir = "mkdir -p dist && cp *.html dist/", "dist"
	})
	if _, err := f.run(task("t1", "replace Hello with Hi there in index.html")); err != nil {
		t.Fatal(err)
	}
	out, err := f.run(action("t1", jobspec.ActionPublish, "publish"))
	if err != nil {
		t.Fatalf("publish: %v %+v", err, out)
	}
	stages := out.Report.StagesMs
	if _, built := stages["build"]; built {
		t.Fatalf("publish of the preview's own tree built again: stages %v", stages)
	}
	if _, promoted := stages["promote"]; !promoted {
		t.Fatalf("publish did not reuse the preview: stages %v", stages)
	}
	if code, body := f.page(out.Report.LiveURL, "/"); code != 200 || !strings.Contains(body, "Hi there") {
		t.Fatalf("live site: %d %q", code, body)
	}

	if _, err := f.run(task("t2", "replace About us with About the bakery in about.html")); err != nil {
		t.Fatal(err)
	}
	f.pushToMain("index.html", "<h1>Hi there, again</h1>\n")
	out, err = f.run(action("t2", jobspec.ActionPublish, "publish"))
	if err != nil {
		t.Fatalf("publish after main moved: %v %+v", err, out)
	}
	if _, built := out.Report.StagesMs["build"]; !built {
		t.Fatalf("a merge that made a new tree was not built: stages %v", out.Report.StagesMs)
	}
	if _, body := f.page(out.Report.LiveURL, "/"); !strings.Contains(body, "again") {
		t.Fatalf("live site after the merge lacks main's change: %q", body)
	}
	if _, body := f.page(out.Report.LiveURL, "/about.html"); !strings.Contains(body, "bakery") {
		t.Fatalf("live site after the merge lacks the thread's change: %q", body)
	}
}
