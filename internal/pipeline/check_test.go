package pipeline_test

import (
	"context"
	"image"
	"image/color"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "image/png"

	"github.com/webordinary/webordinary/internal/capability"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/sandbox"
	"github.com/webordinary/webordinary/internal/shots"
	"github.com/webordinary/webordinary/internal/worker"
)

// The check turn's tests: the fake agent's "on-images" lines run only in a turn whose prompt
// names pictures (the check turn), after reading each of them as images. The instruction's
// other lines run again in that turn, so they are idempotent writes.
const (
	blueHeader  = `write index.html: <html><body style="margin:0"><div style="background:#0000ff;height:300px">Hello</div></body></html>`
	greenHeader = `write index.html: <html><body style="margin:0"><div style="background:#00aa00;height:300px">Hello</div></body></html>`
)

// checkFixture is a fixture whose pipeline takes pictures.
type checkFixture struct {
	*fixture
	sh *shots.Shooter
}

// setupCheck is a pipeline that takes pictures (skipping the test without Chromium), on a
// project with the check turn on (and mods).
func setupCheck(t *testing.T, mods ...func(*project.Project)) checkFixture {
	t.Helper()
	return setupCheckConfig(t, nil, mods...)
}

// setupCheckConfig is setupCheck with cfgMod applied to the pipeline's config too.
func setupCheckConfig(t *testing.T, cfgMod func(*pipelineConfig), mods ...func(*project.Project)) checkFixture {
	t.Helper()
	capability.Need(t, capability.Chromium)
	sb, err := sandbox.New(sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	// Budgets for a loaded machine: Chromium on two busy cores takes many times the
	// production budgets to render.
	sh, err := shots.New(shots.Config{Dir: filepath.Join(t.TempDir(), "shots"), Sandbox: sb,
		PageBudget: time.Minute, Budget: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	f := setupConfig(t, site, func(p *project.Project) {
		p.CheckTurn = true
		for _, m := range mods {
			m(p)
		}
	},
		func(c *pipelineConfig) {
			c.Shots = sh
			if cfgMod != nil {
				cfgMod(c)
			}
		})
	return checkFixture{f, sh}
}

// checkRun runs instruction on thread t1 and fails the test unless the job is done.
func (f *fixture) checkRun(instruction string) (string, worker.Outcome) {
	f.t.Helper()
	tk := task("t1", instruction)
	out, err := f.run(tk)
	if err != nil {
		f.t.Fatalf("job: %v (%+v)", err, out)
	}
	f.t.Logf("job %d ms, stages (ms) %v", out.Report.DurationMs, out.Report.StagesMs)
	return tk.Job.ID, out
}

// versions counts the thread's preview versions of its own work (one per deploy): its
// baseline, the site as the thread started, is not one.
func (f *fixture) versions(thread string) int {
	f.t.Helper()
	m, err := filepath.Glob(filepath.Join(f.dir, "previews", "site", "threads", thread, "versions", "*.json"))
	if err != nil {
		f.t.Fatal(err)
	}
	if th, err := f.threads.Get(context.Background(), thread); err == nil && th.Baseline != nil {
		return len(m) - 1
	}
	return len(m)
}

// commits counts the thread's commits on top of main at the origin.
func (f *fixture) commits(thread string) string {
	return git(f.t, f.origin, "rev-list", "--count", "main..thread-"+thread)
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestCheckTurnFixesAMiss(t *testing.T) {
	t.Parallel()
	f := setupCheck(t)
	job, out := f.checkRun(blueHeader + "\non-images " + greenHeader)
	c := out.Report.Check
	// The project was never published: the before is the default branch's build, so only the
	// index changed, pictured at two widths.
	if c == nil || !c.Changed || c.Pictures != 2 || !strings.Contains(c.Summary, "looked at 2 pictures (png 1280x800, png 390x") {
		t.Fatalf("check report: %+v", c)
	}
	if _, ok := out.Report.StagesMs["check"]; !ok {
		t.Errorf("stages %v lack check", out.Report.StagesMs)
	}
	// first turn: 1 edit; check turn: the instruction's write again and the fix.
	if !near(out.Report.AgentCostUSD, 0.03) || out.Report.AgentTurns != 2+3 {
		t.Errorf("agent cost $%v in %d turns, want $0.03 in 5", out.Report.AgentCostUSD, out.Report.AgentTurns)
	}
	if !strings.Contains(out.Summary, "I looked at the result and fixed what I had missed: ") {
		t.Errorf("summary does not mention the fix:\n%s", out.Summary)
	}
	if body := git(t, f.origin, "show", "thread-t1:index.html"); !strings.Contains(body, "#00aa00") {
		t.Errorf("committed index.html lacks the fix:\n%s", body)
	}
	if n := f.commits("t1"); n != "1" {
		t.Errorf("%s commits on the thread, want 1", n)
	}
	if _, body := f.page(urls(out)[0], "/"); !strings.Contains(body, "#00aa00") {
		t.Errorf("the preview lacks the fix: %q", body)
	}
	if n := f.versions("t1"); n != 2 {
		t.Errorf("%d deploys, want 2 (the first try, the fix)", n)
	}
	f.wantAfterColour(job, color.RGBA{0, 0xaa, 0, 0xff})
}

// wantAfterColour checks that the job's first after-picture shows the header in c: the
// pictures are of the final state.
func (f checkFixture) wantAfterColour(job string, c color.RGBA) {
	f.t.Helper()
	store := f.sh.Store()
	rep, err := store.Report(job)
	if err != nil || len(rep.Pages) == 0 || len(rep.Pages[0].Shots) == 0 {
		f.t.Fatalf("pictures: %+v %v", rep, err)
	}
	path, _ := store.Path(job, rep.Pages[0].Shots[0].After)
	file, err := os.Open(path)
	if err != nil {
		f.t.Fatal(err)
	}
	defer file.Close()
	img, _, err := image.Decode(file)
	if err != nil {
		f.t.Fatal(err)
	}
	if got := color.RGBAModel.Convert(img.At(50, 50)).(color.RGBA); got != c {
		f.t.Errorf("after picture's header is %v, want %v", got, c)
	}
}

func TestCheckTurnFindsItFine(t *testing.T) {
	t.Parallel()
	f := setupCheck(t)
	job, out := f.checkRun(blueHeader + "\non-images say It looks right.")
	c := out.Report.Check
	if c == nil || c.Changed || c.Note != "" || c.Pictures != 2 || !strings.Contains(c.Summary, `said "It looks right."`) {
		t.Fatalf("check report: %+v", c)
	}
	if strings.Contains(out.Summary, "I looked at the result") {
		t.Errorf("the reply mentions a check that changed nothing:\n%s", out.Summary)
	}
	if n, v := f.commits("t1"), f.versions("t1"); n != "1" || v != 1 {
		t.Errorf("%s commits and %d deploys, want 1 and 1", n, v)
	}
	if !near(out.Report.AgentCostUSD, 0.02) {
		t.Errorf("agent cost $%v, want $0.02 (an edit in each turn)", out.Report.AgentCostUSD)
	}
	f.wantAfterColour(job, color.RGBA{0, 0, 0xff, 0xff})
}

func TestCheckTurnFailureKeepsTheJob(t *testing.T) {
	t.Parallel()
	f := setupCheck(t)
	_, out := f.checkRun(blueHeader + "\non-images append index.html: <p>half a fix</p>\non-images fail could not decide")
	c := out.Report.Check
	if c == nil || c.Changed || !strings.Contains(c.Note, "did not count") {
		t.Fatalf("check report: %+v", c)
	}
	if body := git(t, f.origin, "show", "thread-t1:index.html"); !strings.Contains(body, "#0000ff") || strings.Contains(body, "half a fix") {
		t.Errorf("committed index.html should be the first turn's, without the failed check's edit:\n%s", body)
	}
	if strings.Contains(out.Summary, "I looked at the result") {
		t.Errorf("the reply mentions a failed check:\n%s", out.Summary)
	}
	if !near(out.Report.AgentCostUSD, 0.03) {
		t.Errorf("agent cost $%v, want $0.03 (the failed turn counts)", out.Report.AgentCostUSD)
	}
	if v := f.versions("t1"); v != 1 {
		t.Errorf("%d deploys, want 1", v)
	}
}

func TestCheckTurnFixThatDoesNotBuildIsUndone(t *testing.T) {
	t.Parallel()
	f := setupCheck(t, func(p *project.Project) {
		p.BuildCommand, p.OutputDir = "test ! -e broken && mkdir -p dist && cp *.html dist/", "dist"
	})
	_, out := f.checkRun(blueHeader + "\non-images write broken: yes")
	c := out.Report.Check
	if c == nil || c.Changed || !strings.Contains(c.Note, "its fix did not build") {
		t.Fatalf("check report: %+v", c)
	}
	if files := git(t, f.origin, "ls-tree", "--name-only", "thread-t1"); strings.Contains(files, "broken") {
		t.Errorf("the commit has the undone fix's file:\n%s", files)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "ws", "site", "alice", "broken")); !os.IsNotExist(err) {
		t.Errorf("the undone fix's file is still in the working tree: %v", err)
	}
	if _, body := f.page(urls(out)[0], "/"); !strings.Contains(body, "#0000ff") {
		t.Errorf("the preview should still be the first try's: %q", body)
	}
	if v := f.versions("t1"); v != 1 {
		t.Errorf("%d deploys, want 1", v)
	}
}

func TestCheckTurnOffByDefault(t *testing.T) {
	t.Parallel()
	f := setup(t, site, nil)
	_, out := f.checkRun(blueHeader + "\non-images " + greenHeader)
	if _, ok := out.Report.StagesMs["check"]; ok || out.Report.Check != nil {
		t.Fatalf("a check turn ran: stages %v, check %+v", out.Report.StagesMs, out.Report.Check)
	}
	if body := git(t, f.origin, "show", "thread-t1:index.html"); !strings.Contains(body, "#0000ff") {
		t.Errorf("committed index.html:\n%s", body)
	}
	if !near(out.Report.AgentCostUSD, 0.01) {
		t.Errorf("agent cost $%v, want $0.01", out.Report.AgentCostUSD)
	}
}

// TestPicturesCompareWithTheThreadsOwnPreview: a new thread's pictures are not compared with
// another thread's preview (changes this owner never asked for) but with the site as the
// thread started (here the default branch's build: never published), so the other thread's
// change to the index is not pictured; a follow-up compares with the thread's own previous
// preview.
func TestPicturesCompareWithTheThreadsOwnPreview(t *testing.T) {
	t.Parallel()
	f := setupCheck(t, func(p *project.Project) { p.CheckTurn = false })
	if _, err := f.run(task("t1", "replace Hello with Hi there in index.html")); err != nil {
		t.Fatal(err)
	}
	first := task("t2", "replace About us with About the bakery in about.html")
	if _, err := f.run(first); err != nil {
		t.Fatal(err)
	}
	got := f.pagesOf(first.Job.ID)
	if _, ok := got["/"]; ok || len(got) != 1 {
		t.Fatalf("pages pictured: %v, want /about.html only (the index changed in another thread)", slices.Collect(maps.Keys(got)))
	}
	if about := got["/about.html"]; !comparedWithABefore(about) {
		t.Errorf("the edited page was not compared with the site as the thread started: %+v", about)
	}
	follow := task("t2", "replace the bakery with our bakery in about.html")
	if _, err := f.run(follow); err != nil {
		t.Fatal(err)
	}
	rep, err := f.sh.Store().Report(follow.Job.ID)
	if err != nil || len(rep.Pages) == 0 || len(rep.Pages[0].Shots) == 0 || rep.Pages[0].Shots[0].Before == "" {
		t.Fatalf("the follow-up's pictures have no before from the thread's own preview: %+v %v", rep, err)
	}
}

// TestPicturesOfANewThreadCompareWithTheLiveSite: once the site is live, a new thread's
// "before" is the live site: the page it edits is outlined and not called new, a page the
// live site lacks is new, and a page the thread left alone is not pictured.
func TestPicturesOfANewThreadCompareWithTheLiveSite(t *testing.T) {
	t.Parallel()
	f := setupCheck(t, func(p *project.Project) { p.CheckTurn = false })
	if _, err := f.run(task("t1", "replace Hello with Hi there in index.html")); err != nil {
		t.Fatal(err)
	}
	if out, err := f.run(action("t1", jobspec.ActionPublish, "publish")); err != nil || out.Report.LiveURL == "" {
		t.Fatalf("publish: %v %+v", err, out.Report)
	}
	first := task("t2", "replace About us with About the bakery in about.html\nwrite contact.html: <p>Call us</p>")
	if _, err := f.run(first); err != nil {
		t.Fatal(err)
	}
	rep, err := f.sh.Store().Report(first.Job.ID)
	if err != nil {
		t.Fatalf("pictures of the new thread's job: %v", err)
	}
	got := map[string]shots.Page{}
	for _, pg := range rep.Pages {
		got[pg.Path] = pg
	}
	about, contact := got["/about.html"], got["/contact.html"]
	if _, ok := got["/"]; ok || len(got) != 2 {
		t.Fatalf("pages pictured: %v, want /about.html and /contact.html (the index is as live)", slices.Collect(maps.Keys(got)))
	}
	if about.New || len(about.Shots) == 0 || about.Shots[0].Before == "" || len(about.Shots[0].Boxes) == 0 {
		t.Errorf("the edited page was not compared with the live site: %+v", about)
	}
	if !contact.New {
		t.Errorf("a page the live site lacks is not called new: %+v", contact)
	}
}

// pagesOf returns the pictured pages of a job by path.
func (f checkFixture) pagesOf(job string) map[string]shots.Page {
	f.t.Helper()
	rep, err := f.sh.Store().Report(job)
	if err != nil {
		f.t.Fatalf("pictures of job %s: %v", job, err)
	}
	got := map[string]shots.Page{}
	for _, pg := range rep.Pages {
		got[pg.Path] = pg
	}
	return got
}

// comparedWithABefore reports whether a page's first picture has a before and outlines.
func comparedWithABefore(pg shots.Page) bool {
	return !pg.New && len(pg.Shots) > 0 && pg.Shots[0].Before != "" && len(pg.Shots[0].Boxes) > 0
}

// TestPicturesOfANeverPublishedProjectHaveABefore: a project never published still has a
// "before", the default branch's build at the commit the thread started from: the edited page
// is compared with it and outlined, a page it lacks is new, and a page the thread left alone
// is not pictured.
func TestPicturesOfANeverPublishedProjectHaveABefore(t *testing.T) {
	t.Parallel()
	f := setupCheck(t, func(p *project.Project) { p.CheckTurn = false })
	first := task("t1", "replace About us with About the bakery in about.html\nwrite contact.html: <p>Call us</p>")
	if _, err := f.run(first); err != nil {
		t.Fatal(err)
	}
	got := f.pagesOf(first.Job.ID)
	about, contact := got["/about.html"], got["/contact.html"]
	if _, ok := got["/"]; ok || len(got) != 2 {
		t.Fatalf("pages pictured: %v, want /about.html and /contact.html (the index is as on main)", slices.Collect(maps.Keys(got)))
	}
	if !comparedWithABefore(about) {
		t.Errorf("the edited page was not compared with the default branch's build: %+v", about)
	}
	if !contact.New {
		t.Errorf("a page the default branch lacks is not called new: %+v", contact)
	}
}

// TestAPublishInBetweenLeavesTheBeforeAlone: a thread's "before" is what the owner had when
// the thread started. Thread B (another user) publishes while thread A's agent works; A's
// pictures still compare with the site as it was at A's start, so B's change to the index
// does not show up as A's.
func TestAPublishInBetweenLeavesTheBeforeAlone(t *testing.T) {
	t.Parallel()
	a := task("ta", "say now-publish-b\nreplace About us with About the bakery in about.html")
	var publishB func()
	var once sync.Once
	hook := func(c *pipelineConfig) {
		c.Live = func(job string) io.Writer {
			if job != a.Job.ID {
				return io.Discard
			}
			return writerFunc(func(p []byte) (int, error) {
				if strings.Contains(string(p), "now-publish-b") {
					once.Do(publishB)
				}
				return len(p), nil
			})
		}
	}
	f := setupCheckConfig(t, hook, func(p *project.Project) { p.CheckTurn = false })
	if _, err := f.run(taskAs("bob", "tb", "replace Hello with Hi from B in index.html")); err != nil {
		t.Fatal(err)
	}
	var published worker.Outcome
	publishB = func() {
		pub := action("tb", jobspec.ActionPublish, "publish")
		pub.Job.Tenant = taskAs("bob", "tb", "").Job.Tenant
		var err error
		if published, err = f.run(pub); err != nil {
			t.Errorf("B's publish: %v", err)
		}
	}
	if _, err := f.run(a); err != nil {
		t.Fatal(err)
	}
	if published.Report.LiveURL == "" {
		t.Fatalf("B did not publish while A's agent ran: %+v", published.Report)
	}
	got := f.pagesOf(a.Job.ID)
	if _, ok := got["/"]; ok || len(got) != 1 {
		t.Fatalf("pages pictured: %v, want /about.html only (B's index published meanwhile is not A's change)", slices.Collect(maps.Keys(got)))
	}
	if about := got["/about.html"]; !comparedWithABefore(about) {
		t.Errorf("the edited page was not compared with the site at A's start: %+v", about)
	}
}

// writerFunc is an io.Writer made of a function.
type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

// TestTheBeforeBuildLeavesNoTrace: the build of the default branch kept as a new thread's
// before runs in the working tree before the agent; what it leaves there (a file the build
// writes beside the site) is not the agent's work: a job whose agent changes nothing commits
// nothing, and one that changes a page commits that page only.
func TestTheBeforeBuildLeavesNoTrace(t *testing.T) {
	t.Parallel()
	f := setupCheck(t, func(p *project.Project) {
		p.CheckTurn = false
		p.BuildCommand, p.OutputDir = "date > build-stamp.txt && mkdir -p dist && cp *.html dist/", "dist"
	})
	out, err := f.run(task("t1", "say nothing to change"))
	if err != nil || !out.Report.NoChanges || out.Report.Commit != "" {
		t.Fatalf("a job that changed nothing: err %v, report %+v", err, out.Report)
	}
	if th, err := f.threads.Get(context.Background(), "t1"); err != nil || th.Baseline == nil || th.Baseline.From != project.BaselineBuild {
		t.Fatalf("the thread's baseline: %+v %v", th.Baseline, err)
	}
	follow := task("t1", "replace About us with About the bakery in about.html")
	if _, err := f.run(follow); err != nil {
		t.Fatal(err)
	}
	if files := git(t, f.origin, "diff", "--name-only", "main", "thread-t1"); files != "about.html" {
		t.Errorf("the thread's commit changes %q, want about.html only", files)
	}
	if about := f.pagesOf(follow.Job.ID)["/about.html"]; !comparedWithABefore(about) {
		t.Errorf("the edited page was not compared with the baseline kept by the first job: %+v", about)
	}
}

// TestHugoSiteNeverPublishedHasABefore: a real generator's site (the hugo template), never
// published: the first reply's picture of the home page compares with the default branch's
// build, and the commit holds the owner's page only.
func TestHugoSiteNeverPublishedHasABefore(t *testing.T) {
	t.Parallel()
	capability.Need(t, capability.Hugo)
	capability.Need(t, capability.Chromium)
	sb, err := sandbox.New(sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sh, err := shots.New(shots.Config{Dir: filepath.Join(t.TempDir(), "shots"), Sandbox: sb, PageBudget: time.Minute, Budget: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	f := checkFixture{setupConfig(t, templateFiles(t, "hugo"), nil, func(c *pipelineConfig) { c.Shots = sh }), sh}
	first := task("t1", "replace Special: Rye with Special: Sourdough in content/_index.md")
	out, err := f.run(first)
	if err != nil {
		t.Fatalf("job: %v (%+v)", err, out)
	}
	t.Logf("stages (ms) %v", out.Report.StagesMs)
	if home := f.pagesOf(first.Job.ID)["/"]; !comparedWithABefore(home) {
		t.Errorf("the home page was not compared with the default branch's build: %+v", home)
	}
	if files := git(t, f.origin, "diff", "--name-only", "main", "thread-t1"); files != "content/_index.md" {
		t.Errorf("the thread's commit changes %q, want content/_index.md only", files)
	}
}
