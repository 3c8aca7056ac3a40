package awsq_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/awsq"
	"github.com/webordinary/webordinary/internal/broker/awsq/awsqtest"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/worker"
)

// calls counts AWS API calls by "Service.Operation" (one per call, retries not counted).
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *calls) middleware(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("wo-count",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			c.mu.Lock()
			c.n[awsmiddleware.GetServiceID(ctx)+"."+awsmiddleware.GetOperationName(ctx)]++
			c.mu.Unlock()
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
}

func (c *calls) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// report formats after−before divided by n, per operation and by service.
func report(before, after map[string]int, n int) string {
	var lines []string
	total := map[string]float64{}
	for _, op := range slices.Sorted(maps.Keys(after)) {
		if d := after[op] - before[op]; d > 0 {
			per := float64(d) / float64(n)
			lines = append(lines, fmt.Sprintf("  %-36s %6.1f", op, per))
			total[strings.SplitN(op, ".", 2)[0]] += per
		}
	}
	for _, svc := range slices.Sorted(maps.Keys(total)) {
		lines = append(lines, fmt.Sprintf("  %-36s %6.1f", "total "+svc, total[svc]))
	}
	return strings.Join(lines, "\n")
}

// TestCallsPerJobAndClaim runs the real router and a worker pool on awsq, with production's
// 20 s long polls and 15 s lease, and counts the AWS calls: per job on a tenant the worker
// already owns, and per job that needs a claim (request, acquire, open, release). Jobs take
// 100 ms, so heartbeats do not show; each one adds a lease renewal and a visibility extension.
func TestCallsPerJobAndClaim(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("counts calls over real time: skipped in -short mode and under -race (the plain run does it)")
	}
	counter := &calls{n: map[string]int{}}
	ctx, cfg := setup(t, awsq.Config{PollWait: 20 * time.Second, APIOptions: []func(*middleware.Stack) error{counter.middleware}})
	routerBackend, poolBackend := awsqtest.Open(t, cfg), awsqtest.Open(t, cfg)
	r := startRouter(t, ctx, routerBackend)
	owned := startPool(t, ctx, poolBackend, time.Hour)

	const n = 5
	run := func(project string) {
		rec, err := r.Submit(ctx, router.Request{Project: project, User: "alice", Thread: "t1", Instruction: "go"})
		must(t, err, "submit")
		done, err := routerBackend.Jobs.Wait(ctx, rec.Job.ID, func(r broker.JobRecord) bool { return r.State.Final() })
		must(t, err, "wait for the job")
		if done.State != broker.StateDone {
			t.Fatalf("expected job %s done, got %s (%s)", rec.Job.ID, done.State, done.LastError)
		}
	}
	run("warm") // claims the tenant
	before := counter.snapshot()
	for range n {
		run("warm")
	}
	t.Logf("AWS calls per job on an owned tenant (mean of %d):\n%s", n, report(before, counter.snapshot(), n))
	owned()

	startPool(t, ctx, poolBackend, time.Nanosecond) // releases each tenant right after its job
	before = counter.snapshot()
	for i := range n {
		project := fmt.Sprintf("cold%d", i)
		run(project)
		eventually(t, 10*time.Second, func() error {
			if _, err := routerBackend.Leases.Get(ctx, mustTenant(t, project)); !errors.Is(err, broker.ErrNotFound) {
				return fmt.Errorf("expected %s released, got %v", project, err)
			}
			return nil
		})
	}
	t.Logf("AWS calls per job with its claim (new tenant: claim, acquire, open, job, release; mean of %d):\n%s", n, report(before, counter.snapshot(), n))
}

func startRouter(t *testing.T, ctx context.Context, b *broker.Backend) *router.Router {
	t.Helper()
	r, err := router.New(router.Config{Backend: b, Logger: quiet()})
	must(t, err, "router")
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// startPool starts one worker; the returned function stops it.
func startPool(t *testing.T, ctx context.Context, b *broker.Backend, idle time.Duration) func() {
	t.Helper()
	p, err := worker.New(worker.Config{Backend: b, Workers: 1, IdleRelease: idle, Logger: quiet(),
		Processor: worker.ProcessorFunc(func(ctx context.Context, task worker.Task) (worker.Outcome, error) {
			time.Sleep(100 * time.Millisecond)
			return worker.Outcome{Summary: "ok"}, nil
		})})
	must(t, err, "worker pool")
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestWaitingIsCached: the worker pool's "claims waiting?" probe (every 50 ms) costs one
// consistent Scan of the claims table per WaitingCache, not one per ask.
func TestWaitingIsCached(t *testing.T) {
	counter := &calls{n: map[string]int{}}
	ctx, cfg := setup(t, awsq.Config{APIOptions: []func(*middleware.Stack) error{counter.middleware}})
	b := awsqtest.Open(t, cfg)
	before := counter.snapshot()["DynamoDB.Scan"]
	start := time.Now()
	for time.Since(start) < 2*time.Second {
		_, err := b.Claims.Waiting(ctx)
		must(t, err, "waiting")
		time.Sleep(50 * time.Millisecond)
	}
	if got := counter.snapshot()["DynamoDB.Scan"] - before; got > 3 {
		t.Errorf("expected at most 3 Scans in 2 s of asking every 50 ms, got %d", got)
	}
}

// TestFailoverAfterOwnerCrash: an owner that took a job and vanished (no renewal, no release,
// no settle) loses the tenant when its lease runs out; the router's expiry watch re-claims it
// and a live worker runs the job. Logs the time from the lease's expiry to the job's end.
func TestFailoverAfterOwnerCrash(t *testing.T) {
	ctx, cfg := setup(t, awsq.Config{})
	routerBackend, poolBackend, crashedBackend := awsqtest.Open(t, cfg), awsqtest.Open(t, cfg), awsqtest.Open(t, cfg)
	r := startRouter(t, ctx, routerBackend)
	const ttl = 3 * time.Second
	lease, err := crashedBackend.Leases.Acquire(ctx, alice, "crashed", ttl)
	must(t, err, "the crashed owner's lease")
	rec, err := r.Submit(ctx, router.Request{Project: alice.Project, User: alice.User, Thread: "t1", Instruction: "go"})
	must(t, err, "submit")
	q := open(t, ctx, crashedBackend, alice, ttl)
	if _, err := q.Next(ctx, 5*time.Second); err != nil {
		t.Fatalf("expected the crashed owner to hold the job, got %v", err)
	}
	startPool(t, ctx, poolBackend, time.Hour)
	done, err := routerBackend.Jobs.Wait(ctx, rec.Job.ID, func(r broker.JobRecord) bool { return r.State.Final() })
	must(t, err, "wait for the job")
	if done.State != broker.StateDone {
		t.Fatalf("expected the job done elsewhere, got %s (%s)", done.State, done.LastError)
	}
	t.Logf("failover: the job ended %v after the crashed owner's lease expired (TTL %v)", time.Since(lease.ExpiresAt).Round(10*time.Millisecond), ttl)
}

// TestCallsPerLease counts the AWS calls of each lease step: a fencing token and a conditional
// write to acquire (one read more when the lease is held), one conditional write to renew or
// release.
func TestCallsPerLease(t *testing.T) {
	counter := &calls{n: map[string]int{}}
	ctx, cfg := setup(t, awsq.Config{APIOptions: []func(*middleware.Stack) error{counter.middleware}})
	b := awsqtest.Open(t, cfg)
	var l broker.Lease
	var err error
	steps := []struct {
		name string
		want int
		step func() error
	}{
		{"acquire a new tenant", 2, func() error { l, err = b.Leases.Acquire(ctx, alice, "w1", time.Minute); return err }},
		{"renew", 1, func() error { l, err = b.Leases.Renew(ctx, l); return err }},
		{"acquire a held lease", 3, func() error {
			if _, err := b.Leases.Acquire(ctx, alice, "w2", time.Minute); !errors.Is(err, broker.ErrLeaseHeld) {
				return fmt.Errorf("expected ErrLeaseHeld, got %v", err)
			}
			return nil
		}},
		{"release", 1, func() error { return b.Leases.Release(ctx, l) }},
		{"acquire a released lease", 2, func() error { _, err := b.Leases.Acquire(ctx, alice, "w3", time.Minute); return err }},
	}
	for _, s := range steps {
		before := counter.snapshot()
		must(t, s.step(), s.name)
		after, got := counter.snapshot(), 0
		for op, n := range after {
			got += n - before[op]
		}
		t.Logf("%s: %d calls\n%s", s.name, got, report(before, after, 1))
		if got > s.want {
			t.Errorf("%s: expected at most %d AWS calls, got %d", s.name, s.want, got)
		}
	}
}
