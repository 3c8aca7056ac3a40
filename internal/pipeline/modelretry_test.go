package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jhillyerd/enmime/v2"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/natsjs/natsjstest"
	"github.com/webordinary/webordinary/internal/failure"
	"github.com/webordinary/webordinary/internal/mail/outbox"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/worker"
)

// apiErrorRuns returns the start times of the agent runs that reached fakeclaude's
// api-error line.
func (f *fixture) apiErrorRuns(t *testing.T) []time.Time {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, "state", "site", "alice", "agent", "fakeclaude", "api-error-runs"))
	if err != nil {
		t.Fatal(err)
	}
	var runs []time.Time
	for _, line := range strings.Fields(string(b)) {
		at, err := time.Parse(time.RFC3339Nano, line)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, at)
	}
	return runs
}

// TestModelBusyIsRetriedHonouringRetryAfter: the agent's model API answers 429 with
// retry-after 1 twice, then serves; the job succeeds, and each new run started at least the
// retry-after after the one turned away.
func TestModelBusyIsRetriedHonouringRetryAfter(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	f := setupConfig(t, site, nil, func(c *pipelineConfig) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	out, err := f.run(task("t1", "api-error 429 1 2\nreplace Hello with Open today in index.html"))
	if err != nil {
		t.Fatalf("job: %v (%+v)", err, out)
	}
	if got := git(t, f.origin, "show", "thread-t1:index.html"); !strings.Contains(got, "Open today") {
		t.Fatalf("index.html on the thread: %q", got)
	}
	runs := f.apiErrorRuns(t)
	if len(runs) != 3 {
		t.Fatalf("%d agent runs; want 3 (two turned away, one served)", len(runs))
	}
	// The operator hears at the first turn-away, not only when the job gives up.
	if got := logs.String(); strings.Count(got, "level=WARN") != 1 || !strings.Contains(got, "operator attention: the model service turned the agent away") {
		t.Errorf("warnings: want one, at the first turn-away:\n%s", got)
	}
	for i := 1; i < len(runs); i++ {
		if gap := runs[i].Sub(runs[i-1]); gap < time.Second {
			t.Fatalf("run %d started %s after run %d; retry-after was 1s", i+1, gap, i)
		}
		t.Logf("run %d started %s after run %d", i+1, runs[i].Sub(runs[i-1]).Round(time.Millisecond), i)
	}
	if out.Report.ModelRetries != 2 || out.Report.ModelWait < 2*time.Second {
		t.Fatalf("report: %d model retries, waited %s; want 2 and at least 2s", out.Report.ModelRetries, out.Report.ModelWait)
	}
}

// TestModelUnavailableBeyondBudgetTellsOwner: the model API stays overloaded; the pipeline
// retries while the next wait fits in the retry budget, then fails for good, and the owner's
// reply says in plain words that the AI service was unavailable.
func TestModelUnavailableBeyondBudgetTellsOwner(t *testing.T) {
	t.Parallel()
	f := setupConfig(t, site, nil, func(c *pipelineConfig) { c.ModelRetryBudget = 1500 * time.Millisecond })
	out, err := f.run(task("t1", "api-error 529 1 100\nreplace Hello with Open today in index.html"))
	if !errors.Is(err, worker.ErrPermanent) {
		t.Fatalf("job: %v (%+v); want a permanent failure", err, out)
	}
	if runs := f.apiErrorRuns(t); len(runs) != 2 {
		t.Fatalf("%d agent runs; want 2 (one retry fits in 1.5s with retry-after 1s)", len(runs))
	}
	problem := failure.Of(err)
	if problem != failure.Model {
		t.Fatalf("error %q is classed %q; want %q", err, problem, failure.Model)
	}
	msg, cerr := outbox.Compose(outbox.Reply{Kind: outbox.Failed, Problem: problem, Error: err.Error(), Subject: "Hours",
		JobID: "j1", From: mail.Address{Address: "edit@edit.example.net"}, To: mail.Address{Address: "alice@example.com"}}, time.Now())
	if cerr != nil {
		t.Fatal(cerr)
	}
	env, cerr := enmime.ReadEnvelope(bytes.NewReader(msg))
	if cerr != nil {
		t.Fatal(cerr)
	}
	if !strings.Contains(env.Text, "AI service I use to make edits was unavailable") || strings.Contains(env.Text, "529") {
		t.Fatalf("owner's reply:\n%s", env.Text)
	}
	t.Logf("owner's reply:\n%s", env.Text)
}

// TestAgentBaseURL: the server's model API endpoint reaches the agent's environment, and a
// project's own endpoint wins over it.
func TestAgentBaseURL(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, project, want string }{
		{"server default", "", "http://gateway.test:4000"},
		{"project's own", "https://proxy.example.com/anthropic", "https://proxy.example.com/anthropic"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setupConfig(t, site, func(p *project.Project) { p.Agent.BaseURL = tt.project },
				func(c *pipelineConfig) { c.AgentBaseURL = "http://gateway.test:4000" })
			if out, err := f.run(task("t1", "print-env env.txt")); err != nil {
				t.Fatalf("job: %v (%+v)", err, out)
			}
			env := git(t, f.origin, "show", "thread-t1:env.txt")
			if !strings.Contains(env, "ANTHROPIC_BASE_URL="+tt.want+"\n") {
				t.Fatalf("agent environment has no ANTHROPIC_BASE_URL=%s:\n%s", tt.want, env)
			}
		})
	}
}

// writeClaudeLogin is a Claude Code config dir with a subscription login expiring at expires.
func writeClaudeLogin(t *testing.T, expires time.Time) string {
	t.Helper()
	dir := t.TempDir()
	creds := fmt.Sprintf(`{"claudeAiOauth":{"accessToken":"sk-ant-oat01-shared","refreshToken":"sk-ant-ort01-never-shared","expiresAt":%d,"scopes":["user:inference"],"subscriptionType":"max"}}`, expires.UnixMilli())
	if err := os.WriteFile(filepath.Join(dir, ".credentials.json"), []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSharedClaudeLogin: with a shared subscription login, the tenant's claude config holds a
// read-only copy of its access token (no refresh token) when the agent runs; an expired login
// fails the job for good, and the owner reads that the AI service was unavailable.
func TestSharedClaudeLogin(t *testing.T) {
	t.Parallel()
	login := writeClaudeLogin(t, time.Now().Add(time.Hour))
	f := setupConfig(t, site, nil, func(c *pipelineConfig) { c.ClaudeLogin = login })
	if out, err := f.run(task("t1", "replace Hello with Hi in index.html")); err != nil {
		t.Fatalf("job: %v (%+v)", err, out)
	}
	copied := filepath.Join(f.dir, "state", "site", "alice", "agent", ".credentials.json")
	b, err := os.ReadFile(copied)
	fi, _ := os.Stat(copied)
	if err != nil || fi.Mode().Perm() != 0o400 || !strings.Contains(string(b), "sk-ant-oat01-shared") || strings.Contains(string(b), "never-shared") {
		t.Fatalf("tenant's copy (%v, %v): %s", err, fi.Mode(), b)
	}

	g := setupConfig(t, site, nil, func(c *pipelineConfig) { c.ClaudeLogin = writeClaudeLogin(t, time.Now().Add(-time.Minute)) })
	_, err = g.run(task("t1", "replace Hello with Hi in index.html"))
	if !errors.Is(err, worker.ErrPermanent) || failure.Of(err) != failure.Model {
		t.Fatalf("expired login: %v; want a permanent model-service failure", err)
	}
}

// syncBuffer is a buffer a logger may write to from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestModelBusyIsOnTheJobRecord: while the job waits for a busy model service, its record
// says since when (for the mail router to tell the owner); once the agent is served, it no
// longer does.
func TestModelBusyIsOnTheJobRecord(t *testing.T) {
	t.Parallel()
	jobs := natsjstest.Start(t, natsjstest.Options{NoSync: true}).Backend.Jobs
	f := setupConfig(t, site, nil, func(c *pipelineConfig) { c.Jobs = jobs })
	tk := task("t1", "api-error 429 1 1\nreplace Hello with Open today in index.html")
	ctx := context.Background()
	rec := broker.QueuedRecord(tk.Job)
	rec.State = broker.StateRunning
	if err := jobs.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	seen := make(chan time.Time, 1)
	go func() { // bounded only for the failure: the condition holds for a second at least
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		r, _ := jobs.Wait(wctx, tk.Job.ID, func(r broker.JobRecord) bool { return !r.BusySince.IsZero() || r.State.Final() })
		seen <- r.BusySince
	}()
	start := time.Now()
	if out, err := f.run(tk); err != nil {
		t.Fatalf("job: %v (%+v)", err, out)
	}
	if since := <-seen; since.Before(start) {
		t.Fatalf("the record never said the job waited for the model service (busy since %v)", since)
	}
	if got, err := jobs.Get(ctx, tk.Job.ID); err != nil || !got.BusySince.IsZero() {
		t.Fatalf("after the agent was served: busy since %v (%v), want zero", got.BusySince, err)
	}
}
