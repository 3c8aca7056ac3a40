package brokertest

import (
	"testing"

	"github.com/webordinary/webordinary/internal/broker"
)

func fenceContracts() []contract {
	return []contract{
		{"StaleOwnerIsRefused", testStaleOwnerIsRefused},
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

// markDone is a record update by worker with token.
func markDone(worker string, token uint64) func(*broker.JobRecord) error {
	return func(r *broker.JobRecord) error {
		r.State, r.Worker, r.LeaseToken = broker.StateDone, worker, token
		return nil
	}
}
