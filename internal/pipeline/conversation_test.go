package pipeline_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/pipeline/report"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/tenant"
	"github.com/webordinary/webordinary/internal/worker"
)

// convo is a pipeline fixture run the way serve runs it: a router (the project's interrupt
// policy, the server's default "interrupt") and one worker on the embedded engine, the fake
// claude agent as a real process, real git.
type convo struct {
	*fixture
	r   *router.Router
	ctx context.Context
}

// convoSite ignores *.pid, so an agent can say it started ("write-pid agent.pid") without
// changing the site.
var convoSite = map[string]string{"index.html": "<h1>Hello</h1>\n", ".gitignore": "*.pid\n"}

func setupConvo(t *testing.T, mod func(*project.Project)) *convo {
	t.Helper()
	f := setup(t, convoSite, mod)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	r, err := router.New(router.Config{Backend: f.b, ReconcileEvery: 200 * time.Millisecond, Logger: log,
		Policy: func(ctx context.Context, tn tenant.ID) router.Policy {
			return router.Policy(f.projects.InterruptPolicy(ctx, tn.Project, string(router.PolicyInterrupt)))
		}})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := worker.New(worker.Config{Backend: f.b, Processor: f.p, LeaseTTL: 3 * time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, 2)
	go func() { _ = r.Run(ctx); done <- struct{}{} }()
	go func() { _ = pool.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })
	return &convo{fixture: f, r: r, ctx: ctx}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (c *convo) submit(thread, instruction string) string {
	c.t.Helper()
	rec, err := c.r.Submit(c.ctx, router.Request{Project: "site", User: "alice", Thread: thread,
		Instruction: instruction, From: "alice@example.com"})
	if err != nil {
		c.t.Fatal(err)
	}
	return rec.Job.ID
}

func (c *convo) wait(id string) broker.JobRecord {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 60*time.Second)
	defer cancel()
	rec, err := c.b.Jobs.Wait(ctx, id, func(r broker.JobRecord) bool { return r.State.Final() })
	if err != nil || rec.Result == nil {
		c.t.Fatalf("job %s: %v (%s)", id, err, rec.State)
	}
	return rec
}

// agentStarted waits for the running agent's pid file in the workspace.
func (c *convo) agentStarted(pidfile string) {
	c.t.Helper()
	path := filepath.Join(c.dir, "ws", "site", "alice", pidfile)
	waitFor(c.t, "the agent to start", func() bool { _, err := os.Stat(path); return err == nil })
}

// prompts are the prompts the fake agent got, in every session of alice's agent state.
func (c *convo) prompts() []string {
	c.t.Helper()
	files, _ := filepath.Glob(filepath.Join(c.dir, "state", "site", "alice", "agent", "fakeclaude", "sessions", "*.json"))
	var out []string
	for _, f := range files {
		var s struct{ Runs []struct{ Prompt string } }
		data, _ := os.ReadFile(f)
		_ = json.Unmarshal(data, &s)
		for _, r := range s.Runs {
			out = append(out, r.Prompt)
		}
	}
	return out
}

// TestSameThreadInstructionInterruptsAndHandsOver: the owner corrects themselves on the same
// thread; the running job stops, its partial work is committed and pushed, and the newer job's
// agent is told the interrupted instruction and what it had done.
func TestSameThreadInstructionInterruptsAndHandsOver(t *testing.T) {
	t.Parallel()
	c := setupConvo(t, nil)
	first := c.submit("t1", "write partial.txt: half done\nwrite-pid first.pid\nsleep 30")
	c.agentStarted("first.pid")
	second := c.submit("t1", "write final.txt: the real thing")
	a, b := c.wait(first), c.wait(second)
	if a.State != broker.StateInterrupted || b.State != broker.StateDone {
		t.Fatalf("states %s, %s; want interrupted, done (%q, %q)", a.State, b.State, a.LastError, b.LastError)
	}
	ra, rb := report.Of(*a.Result), report.Of(*b.Result)
	if ra.Commit == "" || ra.InterruptedBy != second || !slices.ContainsFunc(ra.Files, func(f report.FileChange) bool { return f.Path == "partial.txt" }) {
		t.Fatalf("interrupted job's report %+v", ra)
	}
	if !strings.Contains(a.Result.Summary, "newer message on this thread") || !strings.Contains(a.Result.Summary, "saved") {
		t.Fatalf("interrupted job's summary %q", a.Result.Summary)
	}
	if git(t, c.origin, "show", ra.Commit+":partial.txt") != "half done" {
		t.Fatal("the partial work is not in the interrupted job's commit")
	}
	if !slices.Equal(rb.Continues, []string{first}) {
		t.Fatalf("newer job continues %v; want [%s]", rb.Continues, first)
	}
	for _, f := range []string{"partial.txt", "final.txt"} {
		git(t, c.origin, "show", "thread-t1:"+f) // fails the test when missing
	}
	var told string
	for _, p := range c.prompts() {
		if strings.Contains(p, "write final.txt") {
			told = p
		}
	}
	for _, want := range []string{"> write partial.txt: half done", "> sleep 30", "partial.txt", ra.Commit[:10], "newest instruction"} {
		if !strings.Contains(told, want) {
			t.Fatalf("the newer job's prompt lacks %q:\n%s", want, told)
		}
	}
	if th, _ := c.threads.Get(c.ctx, "t1"); len(th.Interrupted) != 0 {
		t.Fatalf("the thread still carries handed-over jobs: %+v", th.Interrupted)
	}
}

// TestOtherThreadInstructionWaits: an instruction on another thread of the same owner does
// not interrupt the running job; it runs after it.
func TestOtherThreadInstructionWaits(t *testing.T) {
	t.Parallel()
	c := setupConvo(t, nil)
	first := c.submit("t1", "write a.txt: a\nwrite-pid first.pid\nsleep 1")
	c.agentStarted("first.pid")
	second := c.submit("t2", "write b.txt: b")
	a, b := c.wait(first), c.wait(second)
	if a.State != broker.StateDone || b.State != broker.StateDone {
		t.Fatalf("states %s, %s; want done, done (%q)", a.State, b.State, a.Result.Summary)
	}
	if b.StartedAt.Before(a.FinishedAt) {
		t.Fatalf("the other thread's job started at %s, before the running one finished at %s", b.StartedAt, a.FinishedAt)
	}
	if len(report.Of(*b.Result).Continues) != 0 {
		t.Fatalf("another thread's job was handed %v", report.Of(*b.Result).Continues)
	}
	git(t, c.origin, "show", "thread-t1:a.txt")
	git(t, c.origin, "show", "thread-t2:b.txt")
}

// TestQueuePolicyLetsTheThreadsJobFinish: with the project's policy "queue", even the same
// thread's newer instruction waits.
func TestQueuePolicyLetsTheThreadsJobFinish(t *testing.T) {
	t.Parallel()
	c := setupConvo(t, func(p *project.Project) { p.InterruptPolicy = "queue" })
	first := c.submit("t1", "write a.txt: a\nwrite-pid first.pid\nsleep 1")
	c.agentStarted("first.pid")
	second := c.submit("t1", "write b.txt: b")
	if a, b := c.wait(first), c.wait(second); a.State != broker.StateDone || b.State != broker.StateDone {
		t.Fatalf("states %s, %s; want done, done", a.State, b.State)
	}
}

// TestInterruptedBeforeAnyChangeShowsNoCommit: a job interrupted before it changed anything
// reports no commit (not the thread's previous one) and no files, and says nothing was saved.
func TestInterruptedBeforeAnyChangeShowsNoCommit(t *testing.T) {
	t.Parallel()
	c := setupConvo(t, nil)
	earlier := c.wait(c.submit("t1", "write x.txt: x"))
	if report.Of(*earlier.Result).Commit == "" {
		t.Fatalf("the earlier job committed nothing: %+v", earlier.Result)
	}
	first := c.submit("t1", "write-pid first.pid\nsleep 30")
	c.agentStarted("first.pid")
	second := c.submit("t1", "write y.txt: y")
	a, b := c.wait(first), c.wait(second)
	if a.State != broker.StateInterrupted || b.State != broker.StateDone {
		t.Fatalf("states %s, %s", a.State, b.State)
	}
	if r := report.Of(*a.Result); r.Commit != "" || len(r.Files) != 0 || r.Diffstat != "" {
		t.Fatalf("a job that changed nothing reports commit %q, files %v", r.Commit, r.Files)
	}
	if s := a.Result.Summary; !strings.Contains(s, "before anything was changed") || strings.Contains(s, "saved on") {
		t.Fatalf("summary %q", s)
	}
	if git(t, c.origin, "rev-list", "--count", "thread-t1") != "3" { // init, x, y
		t.Fatal("an empty commit was made for the interrupted job")
	}
}
