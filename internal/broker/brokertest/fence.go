package brokertest

import (
	"testing"

	"github.com/webordinary/webordinary/internal/broker"
)

func fenceContracts() []contract {
	return []contract{
		{"StaleOwnerIsRefused", testStaleOwnerIsRefused},
		{"NewerRecordIsKept", testNewerRecordIsKept},
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
