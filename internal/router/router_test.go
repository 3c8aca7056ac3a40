package router_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/awstest"
	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/awsq/awsqtest"
	"github.com/webordinary/webordinary/internal/broker/mem"
	"github.com/webordinary/webordinary/internal/broker/natsjs/natsjstest"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/tenant"
)

// backends is every backend these tests run on, each as a subtest named after it. One that
// needs an outside service skips in new when none is installed (awsq: the AWS emulators; under
// CI=true a missing emulator fails instead).
var backends = []struct {
	name string
	new  func(t *testing.T) *broker.Backend
}{
	{"natsjs", func(t *testing.T) *broker.Backend {
		return natsjstest.Start(t, natsjstest.Options{NoSync: true}).Backend
	}},
	{"mem", func(t *testing.T) *broker.Backend {
		b := mem.New(mem.Config{})
		t.Cleanup(func() { _ = b.Close() })
		return b
	}},
	{"awsq", func(t *testing.T) *broker.Backend {
		return awsqtest.New(t, awsqtest.Options{})
	}},
}

// TestMain stops the AWS emulators the awsq subtests started.
func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// onEveryBackend runs test on a fresh backend of each kind, in parallel subtests.
func onEveryBackend(t *testing.T, test func(t *testing.T, b *broker.Backend)) {
	t.Helper()
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			test(t, be.new(t))
		})
	}
}

func TestSubmitValidatesWithActionableErrors(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, func(t *testing.T, b *broker.Backend) {
		r, _ := router.New(router.Config{Backend: b})
		cases := []router.Request{
			{Project: "My Site", User: "alice", Instruction: "x"},
			{Project: "site", User: "", Instruction: "x"},
			{Project: "site", User: "alice", Instruction: "  "},
			{Project: "site", User: "alice", Thread: "../t", Instruction: "x"},
			{Project: "site", User: "alice", Instruction: "x", JobID: "nope"},
		}
		for _, c := range cases {
			if _, err := r.Submit(context.Background(), c); !errors.Is(err, router.ErrInvalid) {
				t.Errorf("Submit(%+v) = %v; want ErrInvalid", c, err)
			}
		}
		if n, _ := b.Inbox.Pending(context.Background(), tenant.ID{Project: "site", User: "alice"}); n != 0 {
			t.Fatalf("invalid requests queued %d jobs", n)
		}
	})
}

func TestSubmitWithJobIDIsIdempotent(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, func(t *testing.T, b *broker.Backend) {
		r, _ := router.New(router.Config{Backend: b})
		alice := tenant.ID{Project: "site", User: "alice"}
		older := broker.JobIDAt(time.Now(), "<m1@example.com>")
		grouped, err := broker.JobIDFor(broker.JobIDAt(time.Now(), "<m2@example.com>"), alice)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{older, grouped} { // each kept as given
			req := router.Request{JobID: id, Project: "site", User: "alice", Instruction: "x"}
			for range 3 {
				rec, err := r.Submit(context.Background(), req)
				if err != nil || rec.Job.ID != id {
					t.Fatalf("submit: %v %s; want %s", err, rec.Job.ID, id)
				}
			}
		}
		if n, _ := b.Inbox.Pending(context.Background(), alice); n != 2 {
			t.Fatalf("%d jobs queued; want 2", n)
		}
		bob := tenant.ID{Project: "site", User: "bob"}
		_, err = r.Submit(context.Background(), router.Request{JobID: grouped, Project: "site", User: "bob", Instruction: "x"})
		if !errors.Is(err, router.ErrInvalid) && broker.JobGroup(alice) != broker.JobGroup(bob) {
			t.Errorf("alice's job id submitted for bob: %v; want ErrInvalid", err)
		}
	})
}

// TestAJobAcceptedUnderAnOlderIDIsRecognized: a job recorded and queued under an id of the
// older form (no tenant group: accepted before an upgrade) and submitted again under the id
// the upgraded producer makes of it (a mail delivered again after the restart) is the same
// job, not a second one.
func TestAJobAcceptedUnderAnOlderIDIsRecognized(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, func(t *testing.T, b *broker.Backend) {
		ctx := context.Background()
		r, _ := router.New(router.Config{Backend: b})
		alice := tenant.ID{Project: "site", User: "alice"}
		old := broker.Job{ID: broker.JobIDAt(time.Now(), "<m1@example.com>"), Tenant: alice, Thread: "t1", AcceptedAt: time.Now()}
		if err := b.Jobs.Create(ctx, broker.QueuedRecord(old)); err != nil {
			t.Fatal(err)
		}
		if err := b.Inbox.Publish(ctx, old); err != nil {
			t.Fatal(err)
		}
		id, err := broker.JobIDFor(old.ID, alice) // as the upgraded producer makes it
		if err != nil {
			t.Fatal(err)
		}
		rec, err := r.Submit(ctx, router.Request{JobID: id, Project: "site", User: "alice", Instruction: "x"})
		if err != nil || rec.Job.ID != old.ID {
			t.Fatalf("submit again: %v %s; want the job accepted under %s", err, rec.Job.ID, old.ID)
		}
		if n, _ := b.Inbox.Pending(ctx, alice); n != 1 {
			t.Fatalf("%d jobs queued; want 1", n)
		}
	})
}

// TestTooLargeJobIsRefusedNotLost: a job the engine cannot take is an invalid request (the
// sender can be told), and its record is not left claiming a queued job.
func TestTooLargeJobIsRefusedNotLost(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, func(t *testing.T, b *broker.Backend) {
		r, _ := router.New(router.Config{Backend: b})
		big := jobspec.Attachment{Name: "huge.bin", Data: make([]byte, 70<<20)}
		rec, err := r.Submit(context.Background(), router.Request{Project: "site", User: "alice", Instruction: "x",
			Attachments: []jobspec.Attachment{big}})
		if !errors.Is(err, router.ErrInvalid) || !errors.Is(err, broker.ErrTooLarge) {
			t.Fatalf("70 MB job: %v; want ErrInvalid wrapping ErrTooLarge", err)
		}
		// Its record is written while the job is published: once written, it says failed.
		if got, err := b.Jobs.Get(context.Background(), rec.Job.ID); err == nil && got.State != broker.StateFailed {
			t.Fatalf("the refused job's record says %s; want failed (or no record)", got.State)
		}
	})
}

// resultRouter is a router on b (not yet running) whose results arrive on the channel.
func resultRouter(t *testing.T, b *broker.Backend) (*router.Router, <-chan broker.Result) {
	t.Helper()
	got := make(chan broker.Result, 1)
	r, err := router.New(router.Config{Backend: b, OnResult: func(_ context.Context, res broker.Result) error {
		got <- res
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return r, got
}

// waitResult returns the result the router acted on, failing after a minute without one.
func waitResult(t *testing.T, got <-chan broker.Result) broker.Result {
	t.Helper()
	select {
	case res := <-got:
		return res
	case <-time.After(time.Minute):
		t.Fatal("the router acted on no result within a minute")
		return broker.Result{}
	}
}

// TestLostRecordIsRebuiltFromItsResult: job records persist asynchronously; a record lost with
// an engine crash comes back from the fsync'd result.
func TestLostRecordIsRebuiltFromItsResult(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, func(t *testing.T, b *broker.Backend) {
		r, got := resultRouter(t, b)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { _ = r.Run(ctx) }()
		tn := tenant.ID{Project: "site", User: "alice"}
		job := jobspec.Spec{Instruction: "x", From: "alice@example.com"}.On(broker.Job{ID: broker.NewJobID(), Tenant: tn, Thread: "t1"})
		if err := b.Results.Publish(ctx, broker.Result{JobID: job.ID, Tenant: tn, State: broker.StateDone, Job: &job}); err != nil {
			t.Fatal(err)
		}
		waitResult(t, got)
		rec, err := b.Jobs.Get(ctx, job.ID)
		if err != nil || rec.State != broker.StateDone || jobspec.Of(rec.Job).From != "alice@example.com" {
			t.Fatalf("rebuilt record %+v, %v", rec, err)
		}
	})
}

// TestAResultActsOnItsFinalRecord: a result message for a job whose record is already final
// (a late message from a holder whose lease ran out after its fenced write, on a backend
// without a conditional send) makes the router act on the record's result, which the fenced
// write stored, not on the message's copy.
func TestAResultActsOnItsFinalRecord(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, func(t *testing.T, b *broker.Backend) {
		r, got := resultRouter(t, b)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		tn := tenant.ID{Project: "site", User: "alice"}
		job := broker.Job{ID: broker.NewJobID(), Tenant: tn, Thread: "t1"}
		stored := broker.Result{JobID: job.ID, Tenant: tn, State: broker.StateDone, Worker: "worker-b", LeaseToken: 2}
		rec := broker.QueuedRecord(job)
		rec.State, rec.Worker, rec.LeaseToken, rec.Result = broker.StateDone, "worker-b", 2, &stored
		if err := b.Jobs.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		late := broker.Result{JobID: job.ID, Tenant: tn, State: broker.StateFailed, Error: "stale", Worker: "worker-a", LeaseToken: 1}
		if err := b.Results.Publish(ctx, late); err != nil {
			t.Fatal(err)
		}
		go func() { _ = r.Run(ctx) }()
		res := waitResult(t, got)
		if res.Worker != "worker-b" || res.State != broker.StateDone || res.LeaseToken != 2 {
			t.Fatalf("expected the final record's result (worker-b, done, token 2), got %+v", res)
		}
	})
}

// TestDemandCountsTenantsWithWork: the autoscaling signal counts every tenant with pending
// work, owned or not, and how long the oldest unowned one has waited since its job.
func TestDemandCountsTenantsWithWork(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, func(t *testing.T, b *broker.Backend) {
		ctx := context.Background()
		r, _ := router.New(router.Config{Backend: b})
		for _, u := range []string{"alice", "bob", "bob", "carol"} {
			if _, err := r.Submit(ctx, router.Request{Project: "site", User: u, Instruction: "x"}); err != nil {
				t.Fatal(err)
			}
		}
		owned := tenant.ID{Project: "site", User: "carol"}
		if _, err := b.Leases.Acquire(ctx, owned, "w1", time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		d := r.Demand()
		if d.WorkersWanted != 3 || d.TenantsWaiting != 2 || d.OldestWait <= 0 {
			t.Fatalf("demand %+v; want 3 workers wanted, 2 tenants waiting, a positive oldest wait", d)
		}
	})
}

// TestSubmitNudgesAfterTheCallerLeft: while the router runs, Submit returns once the job is
// durable and asks for a claim in the background; a caller that cancels its context as soon
// as Submit returns (an HTTP request that ended) does not cancel the request for a worker.
func TestSubmitNudgesAfterTheCallerLeft(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, func(t *testing.T, b *broker.Backend) {
		r, _ := router.New(router.Config{Backend: b, ReconcileEvery: time.Hour}) // no pass asks for it
		startRun(t, r)
		time.Sleep(200 * time.Millisecond) // Run's first reconcile pass, on nothing, is over
		ctx, cancel := context.WithCancel(context.Background())
		if _, err := r.Submit(ctx, router.Request{Project: "site", User: "alice", Instruction: "x"}); err != nil {
			t.Fatal(err)
		}
		cancel()
		waitOneClaim(t, b, 10*time.Second, "claims waiting %d (%v); want the submitted tenant's")
	})
}

// claimsFailFirst refuses the first n claim requests, as a cluster electing the claims'
// leader after losing a node does.
type claimsFailFirst struct {
	broker.Claims
	left *atomic.Int32
}

func (c claimsFailFirst) Request(ctx context.Context, t tenant.ID, since time.Time) error {
	if c.left.Add(-1) >= 0 {
		return errors.New("nats: no response from stream")
	}
	return c.Claims.Request(ctx, t, since)
}

// TestANudgeAsksAgainWhileTheEngineDoesNot: a claim request the engine does not answer
// (a cluster electing a leader) is asked again in the background, not left to the
// reconciler (which waits for two passes, and fails its whole pass while a shard of the
// inbox does not answer: 9 s after the kill in TestServesFormAnEmbeddedCluster).
func TestANudgeAsksAgainWhileTheEngineDoesNot(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, func(t *testing.T, b *broker.Backend) {
		failing := *b
		failing.Claims = claimsFailFirst{b.Claims, new(atomic.Int32)}
		failing.Claims.(claimsFailFirst).left.Store(3)
		r, _ := router.New(router.Config{Backend: &failing, ReconcileEvery: time.Hour}) // no pass asks for it
		startRun(t, r)
		time.Sleep(200 * time.Millisecond) // Run's first reconcile pass, on nothing, is over
		if _, err := r.Submit(context.Background(), router.Request{Project: "site", User: "alice", Instruction: "x"}); err != nil {
			t.Fatal(err)
		}
		waitOneClaim(t, b, 10*time.Second, "claims waiting %d (%v); want the submitted tenant's, asked again after 3 failures")
	})
}

// pendingFails fails every Pending, as an inbox shard without a leader does.
type pendingFails struct{ broker.Inbox }

func (pendingFails) Pending(context.Context, tenant.ID) (int, error) {
	return 0, errors.New("nats: no response from stream")
}

// TestAnExpiredLeaseIsClaimedWhenPendingCannotBeCounted: a lease that expires while its
// tenant's pending jobs cannot be counted (the shard electing a leader after a node loss)
// gets a claim anyway (a claim for a tenant with nothing to do is let go by the worker),
// rather than none until the reconciler's two passes.
func TestAnExpiredLeaseIsClaimedWhenPendingCannotBeCounted(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, func(t *testing.T, b *broker.Backend) {
		counting := *b
		counting.Inbox = pendingFails{b.Inbox}
		r, _ := router.New(router.Config{Backend: &counting, ReconcileEvery: time.Hour}) // no pass asks for it
		ctx := context.Background()
		tn := tenant.ID{Project: "site", User: "alice"}
		if _, err := b.Leases.Acquire(ctx, tn, "crashed-w1", time.Second); err != nil {
			t.Fatal(err)
		}
		if err := b.Inbox.Publish(ctx, jobspec.Spec{Instruction: "x"}.On(broker.Job{ID: broker.NewJobID(), Tenant: tn, AcceptedAt: time.Now()})); err != nil {
			t.Fatal(err)
		}
		startRun(t, r)
		waitOneClaim(t, b, 15*time.Second, "claims waiting %d (%v) after the lease expired; want the tenant's")
	})
}

// partInbox answers Tenants with what it has and broker.ErrPartial, as an inbox with one
// shard electing a leader does.
type partInbox struct{ broker.Inbox }

func (p partInbox) Tenants(ctx context.Context) (map[tenant.ID]int, error) {
	got, err := p.Inbox.Tenants(ctx)
	if err != nil {
		return nil, err
	}
	return got, fmt.Errorf("natsjs: tenants with pending jobs: %w (WO_IN_2: no response)", broker.ErrPartial)
}

// TestReconcileServesThePartThatAnswers: a reconcile pass over part of the inbox still asks
// for claims for the unowned tenants it found (it used to fail as a whole).
func TestReconcileServesThePartThatAnswers(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, func(t *testing.T, b *broker.Backend) {
		ctx := context.Background()
		part := *b
		part.Inbox = partInbox{b.Inbox}
		r, _ := router.New(router.Config{Backend: &part})
		tn := tenant.ID{Project: "site", User: "alice"}
		if err := b.Inbox.Publish(ctx, jobspec.Spec{Instruction: "x"}.On(broker.Job{ID: broker.NewJobID(), Tenant: tn, AcceptedAt: time.Now()})); err != nil {
			t.Fatal(err)
		}
		for pass := range 2 { // unowned in two passes in a row
			if _, err := r.Reconcile(ctx); err != nil {
				t.Fatalf("pass %d over part of the inbox: %v", pass+1, err)
			}
		}
		if n, err := b.Claims.Waiting(ctx); err != nil || n != 1 {
			t.Fatalf("claims waiting %d (%v) after two partial passes; want the tenant's", n, err)
		}
	})
}

// waitOneClaim waits up to within for exactly one claim to wait; failing, it says why
// (a format with the count and the error).
func waitOneClaim(t *testing.T, b *broker.Backend, within time.Duration, why string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n, err := b.Claims.Waiting(context.Background())
		if err == nil && n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf(why, n, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startRun runs r until the test ends.
func startRun(t *testing.T, r *router.Router) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { _ = r.Run(ctx); close(ran) }()
	t.Cleanup(func() { stop(); <-ran })
}
