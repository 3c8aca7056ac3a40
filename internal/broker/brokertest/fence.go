package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

func fenceContracts() []contract {
	return []contract{
		{"StaleOwnerIsRefused", testStaleOwnerIsRefused},
		{"NewerRecordIsKept", testNewerRecordIsKept},
		{"StaleCheckIsRefusedByTheStore", testStaleCheckIsRefusedByTheStore},
	}
}

// testStaleOwnerIsRefused: owner A takes the lease and a job's delivery; its lease runs out and
// B takes the tenant and the job. A's record write, result and ack are refused with
// ErrLeaseLost; B's succeed.
func testStaleOwnerIsRefused(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	job := newJob(tenantA, 1)
	fatalIfErr(t, b.Jobs.Create(ctx, broker.QueuedRecord(job)), "create the record")
	publish(t, ctx, b.Inbox, job)
	a := mustAcquire(t, ctx, b.Leases, tenantA, "worker-a", h.MinLeaseTTL)
	fa := broker.NewFence(b, a)
	dA := fa.Delivery(expectNext(t, ctx, openAbandoned(t, ctx, b.Inbox, tenantA), job, 0))
	h.sleepPastExpiry(h.MinLeaseTTL)
	bl := mustAcquire(t, ctx, b.Leases, tenantA, "worker-b", longTTL)
	fb := broker.NewFence(b, bl)
	dB := fb.Delivery(expectNext(t, ctx, openQueue(t, ctx, b.Inbox, tenantA, longTTL), job, 0))

	_, err := fa.UpdateJob(ctx, job.ID, markDone("worker-a", a.Token))
	expectErr(t, err, broker.ErrLeaseLost, "the stale owner's record write")
	res := newResult(tenantA, 1)
	res.JobID, res.LeaseToken = job.ID, a.Token
	expectErr(t, fa.PublishResult(ctx, res), broker.ErrLeaseLost, "the stale owner's result")
	expectErr(t, dA.Ack(ctx), broker.ErrLeaseLost, "the stale owner's ack")

	rec, err := fb.UpdateJob(ctx, job.ID, markDone("worker-b", bl.Token))
	fatalIfErr(t, err, "the new owner's record write")
	if rec.Worker != "worker-b" || rec.LeaseToken != bl.Token {
		t.Errorf("expected the record written by worker-b with token %d, got %+v", bl.Token, rec)
	}
	res.LeaseToken = bl.Token
	fatalIfErr(t, fb.PublishResult(ctx, res), "the new owner's result")
	fatalIfErr(t, dB.Ack(ctx), "the new owner's ack")
}

// testNewerRecordIsKept: a record that carries a newer token than the writer's refuses the
// fenced write, whatever the lease says (the token check is part of the record's
// compare-and-set), and a fenced write stores the writer's token in the record.
func testNewerRecordIsKept(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	rec := newRecord(tenantA, 1)
	fatalIfErr(t, b.Jobs.Create(ctx, rec), "create the record")
	l := mustAcquire(t, ctx, b.Leases, tenantA, "worker-a", longTTL)
	f := broker.NewFence(b, l)
	got, err := f.UpdateJob(ctx, rec.Job.ID, func(r *broker.JobRecord) error { r.Attempts++; return nil })
	fatalIfErr(t, err, "the holder's record write")
	if got.LeaseToken != l.Token {
		t.Errorf("expected the record to carry the writer's token %d, got %d", l.Token, got.LeaseToken)
	}
	_, err = b.Jobs.Update(ctx, rec.Job.ID, markDone("worker-later", l.Token+1))
	fatalIfErr(t, err, "a write under a newer token")
	_, err = f.UpdateJob(ctx, rec.Job.ID, markDone("worker-a", l.Token))
	expectErr(t, err, broker.ErrLeaseLost, "the older token's record write")
	got, err = b.Jobs.Get(ctx, rec.Job.ID)
	fatalIfErr(t, err, "get the record")
	if got.Worker != "worker-later" || got.LeaseToken != l.Token+1 {
		t.Errorf("expected the newer write kept, got %+v", got)
	}
}

// markDone is a record update by worker with token.
func markDone(worker string, token uint64) func(*broker.JobRecord) error {
	return func(r *broker.JobRecord) error {
		r.State, r.Worker, r.LeaseToken = broker.StateDone, worker, token
		return nil
	}
}

// testStaleCheckIsRefusedByTheStore: the race a lease read cannot close. Owner A's check reads
// its lease live (here: replayed, as a read made just before the takeover), then the lease
// runs out and B takes it, then A writes. Each write the backend conditions on the lease in
// the store (FencedJobs, FencedResults, FencedDelivery: every write not in
// Harness.ReadFenced) is refused with ErrLeaseLost and leaves nothing behind; B's writes then
// succeed. A write the backend fences only by the read is not tested here.
func testStaleCheckIsRefusedByTheStore(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	job := newJob(tenantA, 1)
	fatalIfErr(t, b.Jobs.Create(ctx, broker.QueuedRecord(job)), "create the record")
	publish(t, ctx, b.Inbox, job)
	a := mustAcquire(t, ctx, b.Leases, tenantA, "worker-a", h.MinLeaseTTL)
	d := expectNext(t, ctx, openFront(t, ctx, b, tenantA, true), job, 0) // as a worker opens it
	h.sleepPastExpiry(h.MinLeaseTTL)
	bl := mustAcquire(t, ctx, b.Leases, tenantA, "worker-b", longTTL)
	stale := *b
	stale.Leases = staleReads{Leases: b.Leases, seen: a}
	fa := broker.NewFence(&stale, a)
	fatalIfErr(t, fa.Check(ctx), "the stale check (replayed)")

	_, fj := b.Jobs.(broker.FencedJobs)
	_, fr := b.Results.(broker.FencedResults)
	_, fd := d.(broker.FencedDelivery)
	tested := 0
	if storeFenced(t, h, RecordWrites, fj, "record writes") {
		tested++
		staleRecordWriteIsRefused(t, ctx, b, fa, job.ID, a.Token)
	}
	res := newResult(tenantA, 1)
	res.JobID, res.LeaseToken = job.ID, a.Token
	if storeFenced(t, h, ResultWrites, fr, "results") {
		tested++
		expectErr(t, fa.PublishResult(ctx, res), broker.ErrLeaseLost, "the stale owner's result")
	}
	if storeFenced(t, h, Settles, fd, "settles") {
		tested++
		staleSettlesAreRefused(t, ctx, b, fa.Delivery(d))
	}
	if tested == 0 {
		t.Skip("the backend fences every write by a lease read only")
	}
	newOwnerWrites(t, ctx, b, bl, job, res)
}

// storeFenced tells whether the backend's store fences w (it has the capability), and fails
// the test when it does not though the harness does not declare w read-fenced.
func storeFenced(t *testing.T, h Harness, w Writes, capable bool, what string) bool {
	t.Helper()
	switch {
	case capable:
		return true
	case h.ReadFenced&w == 0:
		t.Errorf("%s: expected them conditioned on the lease in the store (or declared in Harness.ReadFenced)", what)
	default:
		t.Logf("%s: fenced by a lease read only, not tested", what)
	}
	return false
}

// staleRecordWriteIsRefused: the stale owner's record write is refused and the record left
// queued.
func staleRecordWriteIsRefused(t *testing.T, ctx context.Context, b *broker.Backend, fa *broker.Fence, id string, token uint64) {
	t.Helper()
	_, err := fa.UpdateJob(ctx, id, markDone("worker-a", token))
	expectErr(t, err, broker.ErrLeaseLost, "the stale owner's record write")
	rec, err := b.Jobs.Get(ctx, id)
	fatalIfErr(t, err, "get the record")
	if rec.State != broker.StateQueued {
		t.Errorf("expected the record left queued, got %+v", rec)
	}
}

// staleSettlesAreRefused: the stale owner's Ack, Retry and DeadLetter are refused and the job
// left pending.
func staleSettlesAreRefused(t *testing.T, ctx context.Context, b *broker.Backend, d broker.Delivery) {
	t.Helper()
	expectErr(t, d.Ack(ctx), broker.ErrLeaseLost, "the stale owner's ack")
	expectErr(t, d.Retry(ctx, 0), broker.ErrLeaseLost, "the stale owner's retry")
	expectErr(t, d.DeadLetter(ctx, "stale"), broker.ErrLeaseLost, "the stale owner's dead letter")
	n, err := b.Inbox.Pending(ctx, tenantA)
	fatalIfErr(t, err, "pending")
	if n != 1 {
		t.Errorf("expected the job still pending after the refused settles, got %d", n)
	}
}

// newOwnerWrites: B's record write and result succeed after a stale owner's were refused, and
// the result the router reads is B's.
func newOwnerWrites(t *testing.T, ctx context.Context, b *broker.Backend, bl broker.Lease, job broker.Job, res broker.Result) {
	t.Helper()
	fb := broker.NewFence(b, bl)
	_, err := fb.UpdateJob(ctx, job.ID, markDone("worker-b", bl.Token))
	fatalIfErr(t, err, "the new owner's record write")
	res.LeaseToken = bl.Token
	fatalIfErr(t, fb.PublishResult(ctx, res), "the new owner's result")
	nctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rd, err := b.Results.Next(nctx)
	fatalIfErr(t, err, "read the result")
	if got := rd.Result(); got.LeaseToken != bl.Token {
		t.Errorf("expected the new owner's result (token %d), got token %d", bl.Token, got.LeaseToken)
	}
	fatalIfErr(t, rd.Ack(ctx), "ack the result")
}

// staleReads is Leases whose Get answers for one tenant with the lease as its holder saw it:
// fault injection that makes a holder's check read its lease live just before a takeover.
type staleReads struct {
	broker.Leases
	seen broker.Lease
}

func (s staleReads) Get(ctx context.Context, t tenant.ID) (broker.Lease, error) {
	if t == s.seen.Tenant {
		l := s.seen
		l.ExpiresAt = time.Now().Add(time.Minute) // as read before it ran out
		return l, nil
	}
	return s.Leases.Get(ctx, t)
}
