package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/natsjs/natsjstest"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/tenant"
	"github.com/webordinary/webordinary/internal/worker"
)

// fixture is one test's engine, router and helpers.
type fixture struct {
	t      *testing.T
	env    *natsjstest.Env
	router *router.Router
	ctx    context.Context
}

func setup(t *testing.T) *fixture {
	t.Helper()
	env := natsjstest.Start(t, natsjstest.Options{NoSync: true})
	ctx, cancel := context.WithCancel(context.Background())
	r, err := router.New(router.Config{Backend: env.Backend, ReconcileEvery: 200 * time.Millisecond,
		RepeatClaimAfter: time.Second, Logger: testLogger(t),
		Policy: func(context.Context, tenant.ID) router.Policy { return router.PolicyQueue }})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &fixture{t: t, env: env, router: r, ctx: ctx}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}

// pool starts a worker pool on its own connection (like a separate process) and returns a
// stop function that shuts it down gracefully and waits.
func (f *fixture) pool(cfg worker.Config) (stop func()) {
	f.t.Helper()
	_, b := natsjstest.Connect(f.t, f.env)
	cfg.Backend = b
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(f.t)
	}
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = 50 * time.Millisecond
	}
	p, err := worker.New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	f.t.Cleanup(stop)
	return stop
}

func (f *fixture) submit(project, user, instruction string) broker.JobRecord {
	f.t.Helper()
	rec, err := f.router.Submit(f.ctx, router.Request{Project: project, User: user, Thread: "t1", Instruction: instruction})
	if err != nil {
		f.t.Fatalf("submit: %v", err)
	}
	return rec
}

// wait waits for job id to reach a final state.
func (f *fixture) wait(id string, within time.Duration) broker.JobRecord {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, within)
	defer cancel()
	rec, err := f.env.Backend.Jobs.Wait(ctx, id, func(r broker.JobRecord) bool { return r.State.Final() })
	if err != nil {
		cur, _ := f.env.Backend.Jobs.Get(f.ctx, id)
		f.t.Fatalf("job %s not final within %s: %v (state %s, last error %q)", id, within, err, cur.State, cur.LastError)
	}
	return rec
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var errBoom = errors.New("boom")

// connectRaw opens a connection and backend the test can cut (a crash).
func connectRaw(f *fixture) (interface{ Close() }, *broker.Backend) {
	return natsjstest.Connect(f.t, f.env)
}
