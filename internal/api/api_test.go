package api_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/api"
	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/natsjs/natsjstest"
	"github.com/webordinary/webordinary/internal/dashboard"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/mail/auth"
	"github.com/webordinary/webordinary/internal/mail/inbound"
	"github.com/webordinary/webordinary/internal/mail/intake"
	"github.com/webordinary/webordinary/internal/pipeline/report"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/worker"
)

const token = "wo_test_token"

// setup serves the API, behind the dashboard's Guard as serve does, over a real engine, router,
// worker pool, project store, mail router and SMTP intake; it returns a client with the token.
func setup(t *testing.T) *api.Client {
	t.Helper()
	c, _ := setupEnv(t)
	return c
}

// setupEnv is setup that also returns the engine.
func setupEnv(t *testing.T) (*api.Client, *natsjstest.Env) {
	t.Helper()
	ctx := context.Background()
	env := natsjstest.Start(t, natsjstest.Options{NoSync: true})
	log := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r, err := router.New(router.Config{Backend: env.Backend, ReconcileEvery: 200 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	run(t, r.Run)
	pool, err := worker.New(worker.Config{Backend: env.Backend, Processor: processor(), Workers: 1, Process: "test",
		LeaseTTL: 30 * time.Second, ShutdownGrace: 100 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	run(t, pool.Run)
	projects, err := project.Open(ctx, env.Backend)
	if err != nil {
		t.Fatal(err)
	}
	in := newInbound(t, env, r, projects)
	smtp, err := intake.New(intake.Config{Addr: "127.0.0.1:0", Domains: []string{"edit.localhost"}, Spool: t.TempDir(),
		Handler: in.Handle, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	run(t, smtp.Run)
	h := (&api.Server{Backend: env.Backend, Router: r, Logger: log, LocalWorkers: pool.Status, Projects: projects,
		InspectMail: in.Inspect, Quarantine: smtp}).Handler()
	d, err := dashboard.New(dashboard.Config{Backend: env.Backend, Router: r, Token: token, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d.Guard(h))
	t.Cleanup(srv.Close)
	return api.NewClient(srv.URL, token), env
}

func newInbound(t *testing.T, env *natsjstest.Env, r *router.Router, projects *project.Store) *inbound.Inbound {
	t.Helper()
	ctx := context.Background()
	threads, err := project.OpenThreads(ctx, env.Backend)
	if err != nil {
		t.Fatal(err)
	}
	mail, err := env.Backend.Table(ctx, "mail")
	if err != nil {
		t.Fatal(err)
	}
	in, err := inbound.New(inbound.Config{Domains: []string{"edit.localhost"}, Secret: []byte(strings.Repeat("s", 32)),
		Auth: auth.Config{Resolver: &auth.StaticResolver{}}, Projects: projects, Threads: threads, Mail: mail,
		Jobs: env.Backend.Jobs, Router: r})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// processor finishes every job at once, reporting a commit; "slow" jobs wait to be interrupted.
func processor() worker.Processor {
	return worker.ProcessorFunc(func(ctx context.Context, task worker.Task) (worker.Outcome, error) {
		if jobspec.Of(task.Job).Instruction == "slow" {
			<-ctx.Done()
			return worker.Outcome{Report: report.Report{Interrupted: true}}, context.Cause(ctx)
		}
		return worker.Outcome{Summary: "did " + jobspec.Of(task.Job).Instruction, Report: report.Report{Commit: "c0ffee"}}, nil
	})
}

func run(t *testing.T, fn func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = fn(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// TestClientJobs: submit, wait for the result with its typed report, see it in the status.
func TestClientJobs(t *testing.T) {
	t.Parallel()
	c, ctx := setup(t), context.Background()
	rec, err := c.Submit(ctx, router.Request{Project: "site", User: "alice", Instruction: "green header"})
	if err != nil || rec.Job.ID == "" {
		t.Fatalf("submit: %+v %v", rec, err)
	}
	done, err := c.WaitJob(ctx, rec.Job.ID, 30*time.Second)
	if err != nil || done.State != broker.StateDone || done.Result == nil || report.Of(*done.Result).Commit != "c0ffee" {
		t.Fatalf("wait: %+v %v", done, err)
	}
	st, err := c.Status(ctx)
	if err != nil || len(st.Jobs) != 1 || st.Jobs[0].Job.ID != rec.Job.ID || len(st.Workers) != 1 {
		t.Fatalf("status: %+v %v", st, err)
	}
	if err := c.Health(ctx); err != nil {
		t.Fatalf("health: %v", err)
	}
}

// TestClientInterrupt: a running job is interrupted; an unknown one is ErrNotFound.
func TestClientInterrupt(t *testing.T) {
	t.Parallel()
	c, ctx := setup(t), context.Background()
	rec, err := c.Submit(ctx, router.Request{Project: "site", User: "alice", Instruction: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	for rec.State != broker.StateRunning {
		if rec, err = c.Job(ctx, rec.Job.ID, 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.Interrupt(ctx, rec.Job.ID); err != nil {
		t.Fatal(err)
	}
	if rec, err = c.WaitJob(ctx, rec.Job.ID, 30*time.Second); err != nil || rec.State != broker.StateInterrupted {
		t.Fatalf("after interrupt: %s %v", rec.State, err)
	}
	if err := c.Interrupt(ctx, "no-such-job"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("unknown job: %v", err)
	}
}

// TestClientProjects: add, list, get, replace, remove; a missing project is ErrNotFound.
func TestClientProjects(t *testing.T) {
	t.Parallel()
	c, ctx := setup(t), context.Background()
	p := project.Project{ID: "site", RepoURL: "/srv/site.git", Agent: project.AgentSpec{Kind: "claude"}}
	if _, err := c.PutProject(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.DefaultBranch = "trunk"
	if _, err := c.PutProject(ctx, p); err != nil {
		t.Fatal(err)
	}
	got, err := c.Project(ctx, "site")
	if err != nil || got.DefaultBranch != "trunk" {
		t.Fatalf("get: %+v %v", got, err)
	}
	if ps, err := c.Projects(ctx); err != nil || len(ps) != 1 {
		t.Fatalf("list: %+v %v", ps, err)
	}
	if err := c.RemoveProject(ctx, "site"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Project(ctx, "site"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("get removed: %v", err)
	}
	if _, err := c.PutProject(ctx, project.Project{ID: "Bad Id!"}); !errors.Is(err, api.ErrInvalid) {
		t.Fatalf("bad project: %v", err)
	}
}

// TestClientMail: inspect a message (decision with its reason), and the quarantine's routes.
func TestClientMail(t *testing.T) {
	t.Parallel()
	c, ctx := setup(t), context.Background()
	raw := "From: stranger@example.com\r\nTo: edit@edit.localhost\r\nSubject: hi\r\nMessage-ID: <1@example.com>\r\n\r\nmake it blue\r\n"
	rep, err := c.InspectMail(ctx, api.MailEnvelope{IP: "127.0.0.1", MailFrom: "stranger@example.com"}, []byte(raw))
	if err != nil || rep.From != "stranger@example.com" || rep.Decision.Action == "run" || rep.Decision.Reason == "" {
		t.Fatalf("inspect: %+v %v", rep, err)
	}
	if q, err := c.Quarantined(ctx); err != nil || len(q) != 0 {
		t.Fatalf("quarantine: %v %v", q, err)
	}
	if err := c.ReleaseQuarantined(ctx, "nope"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("release unknown: %v", err)
	}
	if err := c.DeleteQuarantined(ctx, "nope"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("delete unknown: %v", err)
	}
}

// TestClientErrors: a wrong token is ErrUnauthorized, an invalid job ErrInvalid with the
// server's message, a closed port ErrUnreachable.
func TestClientErrors(t *testing.T) {
	t.Parallel()
	c, ctx := setup(t), context.Background()
	wrong := api.NewClient(c.Base, "wrong")
	if _, err := wrong.Status(ctx); !errors.Is(err, api.ErrUnauthorized) {
		t.Fatalf("wrong token: %v", err)
	}
	_, err := c.Submit(ctx, router.Request{Project: "site", Instruction: "x"})
	var apiErr *api.Error
	if !errors.Is(err, api.ErrInvalid) || !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || apiErr.Message == "" {
		t.Fatalf("invalid submit: %v", err)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	if _, err := api.NewClient(srv.URL, "").Status(ctx); !errors.Is(err, api.ErrUnreachable) {
		t.Fatalf("closed port: %v", err)
	}
}
