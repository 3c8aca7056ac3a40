package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/awstest"
	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/awsq/awsqtest"
	"github.com/webordinary/webordinary/internal/broker/mem"
	"github.com/webordinary/webordinary/internal/broker/natsjs/natsjstest"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/tenant"
	"github.com/webordinary/webordinary/internal/worker"
)

// backend is an engine the protocol tests run on; every test runs on each, as a subtest
// named after it.
type backend struct {
	name string
	// start returns a fresh engine for one test, stopped when the test ends. A backend that
	// needs an outside service skips the test here when none is configured.
	start func(t *testing.T) engine
	// remote says every call is a network round trip to an emulated cloud service: the
	// backlog run (hundreds of jobs timed against each other) is sized for local engines and
	// skips it.
	remote bool
	// leaseTTL is the pools' default lease TTL. A remote backend gets more: its heartbeat
	// (a third of the TTL) is a round trip to an emulator that can take seconds on a loaded
	// two-core machine, and a short TTL then loses leases the test did not mean to lose.
	leaseTTL time.Duration
}

// backends is every backend the protocol tests run on.
var backends = []backend{
	{"natsjs", startNATS, false, 2 * time.Second},
	{"mem", startMem, false, 2 * time.Second},
	{"awsq", startAWS, true, 15 * time.Second},
}

// TestMain stops the AWS emulators the awsq subtests started.
func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// engine is one test's broker engine.
type engine struct {
	// b is the test's own client: the router's and the assertions'.
	b *broker.Backend
	// connect opens another client, as a separate worker process would; cut closes it
	// without settling or releasing anything (a crash).
	connect func(t *testing.T) (b *broker.Backend, cut func())
}

// startNATS starts an embedded JetStream server; each client is an in-process connection.
func startNATS(t *testing.T) engine {
	env := natsjstest.Start(t, natsjstest.Options{NoSync: true})
	return engine{b: env.Backend, connect: func(t *testing.T) (*broker.Backend, func()) {
		nc, b := natsjstest.Connect(t, env)
		return b, nc.Close
	}}
}

// startMem starts an in-memory engine with natsjstest's claim ack wait.
func startMem(t *testing.T) engine {
	e := mem.NewEngine(mem.Config{ClaimAckWait: 2 * time.Second})
	t.Cleanup(func() { _ = e.Close() })
	return engine{b: e.Connect(), connect: func(t *testing.T) (*broker.Backend, func()) {
		b := e.Connect()
		cut := func() { _ = b.Close() }
		t.Cleanup(cut)
		return b, cut
	}}
}

// startAWS gives the test a fresh resource prefix on the shared AWS emulators (skipped when
// they are not installed, failed under CI=true); each client is its own awsq backend, as a
// worker process's would be, and cutting one closes it without settling or releasing.
func startAWS(t *testing.T) engine {
	cfg := awsqtest.Config(t, awsqtest.Options{})
	b := awsqtest.Open(t, cfg)
	cfg.Create = false // the first Open made the tables and shared queues
	return engine{b: b, connect: func(t *testing.T) (*broker.Backend, func()) {
		c := awsqtest.Open(t, cfg)
		return c, func() { _ = c.Close() }
	}}
}

// onEveryBackend runs test on a fresh fixture of each backend, in parallel subtests.
func onEveryBackend(t *testing.T, test func(t *testing.T, f *fixture)) {
	t.Helper()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			if be.remote && raceDetector {
				// Under the race detector every emulator round trip and submit is several times
				// slower, and the throughput-bound tests (200 jobs, a quantum) measure that. The
				// adapter's own goroutines run under -race in internal/broker/awsq.
				t.Skip("remote backend skipped under -race: the plain run covers the protocol on it")
			}
			t.Parallel()
			test(t, setup(t, be))
		})
	}
}

// fixture is one test's engine, router and helpers.
type fixture struct {
	t      *testing.T
	eng    engine
	b      *broker.Backend // eng.b
	router *router.Router
	ctx    context.Context
	// leaseTTL is the pools' lease TTL unless a test sets one.
	leaseTTL time.Duration
	// remote: every call is a round trip to an emulator, which a busy machine slows most.
	remote bool
}

func setup(t *testing.T, be backend) *fixture {
	t.Helper()
	eng := be.start(t)
	ctx, cancel := context.WithCancel(context.Background())
	rb, listed := withFirstListing(eng.b)
	r, err := router.New(router.Config{Backend: rb, ReconcileEvery: 200 * time.Millisecond,
		RepeatClaimAfter: time.Second, Logger: testLogger(t),
		Policy: func(context.Context, tenant.ID) router.Policy { return router.PolicyQueue }})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	// The router's start-up pass claims for every unowned tenant with pending jobs. Had it
	// not listed the tenants before the test submits, it could add a second claim for the
	// test's first job at random; so the test starts once it has (with nothing pending).
	select {
	case <-listed:
	case <-time.After(10 * time.Second):
		t.Fatal("the router did not start its reconciler")
	}
	return &fixture{t: t, eng: eng, b: eng.b, router: r, ctx: ctx, leaseTTL: be.leaseTTL, remote: be.remote}
}

// withFirstListing returns b with an Inbox that closes listed once Tenants first returned.
func withFirstListing(b *broker.Backend) (*broker.Backend, <-chan struct{}) {
	in := &listingInbox{Inbox: b.Inbox, listed: make(chan struct{})}
	rb := *b
	rb.Inbox = in
	return &rb, in.listed
}

// listingInbox is a real Inbox that tells when Tenants first returned.
type listingInbox struct {
	broker.Inbox
	once   sync.Once
	listed chan struct{}
}

func (in *listingInbox) Tenants(ctx context.Context) (map[tenant.ID]int, error) {
	m, err := in.Inbox.Tenants(ctx)
	in.once.Do(func() { close(in.listed) })
	return m, err
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

// pool starts a worker pool on its own client (like a separate process) and returns a
// stop function that shuts it down gracefully and waits.
func (f *fixture) pool(cfg worker.Config) (stop func()) {
	f.t.Helper()
	if cfg.Backend == nil { // a test that wraps a port connects itself
		cfg.Backend, _ = f.eng.connect(f.t)
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = f.leaseTTL
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

// wait waits for job id to reach a final state, within three times as long on a remote
// backend (an emulator's round trips take seconds on a loaded machine).
func (f *fixture) wait(id string, within time.Duration) broker.JobRecord {
	f.t.Helper()
	if f.remote {
		within *= 3
	}
	ctx, cancel := context.WithTimeout(f.ctx, within)
	defer cancel()
	rec, err := f.b.Jobs.Wait(ctx, id, func(r broker.JobRecord) bool { return r.State.Final() })
	if err != nil {
		cur, _ := f.b.Jobs.Get(f.ctx, id)
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

// connect opens a client the test can cut (a crash).
func (f *fixture) connect() (*broker.Backend, func()) {
	return f.eng.connect(f.t)
}
