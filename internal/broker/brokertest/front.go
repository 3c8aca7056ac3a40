package brokertest

import (
	"context"
	"fmt"
	"testing"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// The front of a tenant's queue (broker.OpenQueue, broker.Promoter) is written once over the
// ports; these contracts check that every backend's Inbox and Table carry it.
func frontContracts() []contract {
	return []contract{
		{"PromotedRunsNext", testPromotedRunsNext},
		{"PromotedWaitsForTheDeliveryInFlight", testPromotedWaitsInFlight},
		{"PromotedSurvivesItsOwner", testPromotedSurvivesOwner},
		{"PromotedRetryAndDeadLetter", testPromotedRetryAndDeadLetter},
	}
}

// openFront opens tn's queue with its front and closes it when the test ends.
func openFront(t *testing.T, ctx context.Context, b *broker.Backend, tn tenant.ID, abandon bool) broker.Queue {
	t.Helper()
	front, err := b.Table(ctx, broker.FrontTable)
	fatalIfErr(t, err, "open the front table")
	q, err := broker.OpenQueue(ctx, b.Inbox, front, tn, broker.QueueOptions{AckWait: longTTL})
	fatalIfErr(t, err, fmt.Sprintf("open %s", tn))
	t.Cleanup(func() {
		ctx, cancel := cleanupContext()
		defer cancel()
		if err := q.Close(ctx); err != nil && !abandon {
			t.Errorf("close %s: expected no error, got %v", tn, err)
		}
	})
	return q
}

func promote(t *testing.T, ctx context.Context, q broker.Queue, job broker.Job) {
	t.Helper()
	ok, err := broker.Promote(ctx, q, job)
	if !ok || err != nil {
		t.Fatalf("promote %q: expected it promoted, got %v, %v", label(job), ok, err)
	}
}

// testPromotedRunsNext: the A/B/A case. A job promoted while another runs is delivered right
// after it, ahead of the jobs queued before it; promoting it again changes nothing; its own
// place in the queue is passed over, and the tenant's count comes to nothing.
func testPromotedRunsNext(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	jobs := publishN(t, ctx, b.Inbox, tenantA, 4) // a1, b1, b2, a2
	q := openFront(t, ctx, b, tenantA, false)
	running := expectNext(t, ctx, q, jobs[0], 1)
	promote(t, ctx, q, jobs[3])
	promote(t, ctx, q, jobs[3])
	ack(t, ctx, running)
	for _, job := range []broker.Job{jobs[3], jobs[1], jobs[2]} {
		ack(t, ctx, expectNext(t, ctx, q, job, 1))
	}
	expectNothing(t, ctx, q)
	fatalIfErr(t, q.Close(ctx), "close")
	eventuallyTenants(t, ctx, b.Inbox, map[tenant.ID]int{})
	consumeInOrder(t, ctx, b.Inbox, tenantA, nil)
}

// testPromotedWaitsInFlight: a job promoted while a delivery is in flight does not overtake
// it, however long it stays unsettled: the queue delivers one job at a time.
func testPromotedWaitsInFlight(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	jobs := publishN(t, ctx, b.Inbox, tenantA, 3)
	q := openFront(t, ctx, b, tenantA, false)
	running := expectNext(t, ctx, q, jobs[0], 1)
	promote(t, ctx, q, jobs[2])
	expectNothing(t, ctx, q)
	ack(t, ctx, running)
	ack(t, ctx, expectNext(t, ctx, q, jobs[2], 1))
	ack(t, ctx, expectNext(t, ctx, q, jobs[1], 1))
	expectNothing(t, ctx, q)
}

// testPromotedSurvivesOwner: an owner that promotes a job and crashes before settling the
// job in flight leaves both: the next owner gets the job in flight again first, then the
// promoted one, then the rest.
func testPromotedSurvivesOwner(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	jobs := publishN(t, ctx, b.Inbox, tenantA, 3)
	crashed := openFront(t, ctx, b, tenantA, true)
	expectNext(t, ctx, crashed, jobs[0], 1)
	promote(t, ctx, crashed, jobs[2])
	q := openFront(t, ctx, b, tenantA, false)
	for _, job := range []broker.Job{jobs[0], jobs[2], jobs[1]} {
		ack(t, ctx, expectNext(t, ctx, q, job, 0))
	}
	expectNothing(t, ctx, q)
}

// testPromotedRetryAndDeadLetter: a promoted job retried comes again first, attempt 2;
// dead-lettered, it is listed with its reason once its place in the queue comes up, and is
// never delivered again.
func testPromotedRetryAndDeadLetter(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	jobs := publishN(t, ctx, b.Inbox, tenantA, 3)
	q := openFront(t, ctx, b, tenantA, false)
	running := expectNext(t, ctx, q, jobs[0], 1)
	promote(t, ctx, q, jobs[2])
	ack(t, ctx, running)
	d := expectNext(t, ctx, q, jobs[2], 1)
	fatalIfErr(t, d.Retry(ctx, 0), "retry")
	d = expectNext(t, ctx, q, jobs[2], 2)
	const reason = "failed twice: the agent could not start"
	fatalIfErr(t, d.DeadLetter(ctx, reason), "dead-letter")
	fatalIfErr(t, d.DeadLetter(ctx, reason), "dead-letter again")
	ack(t, ctx, expectNext(t, ctx, q, jobs[1], 1))
	expectNothing(t, ctx, q)
	expectDeadLetters(t, ctx, b.Inbox, tenantA, reason, jobs[2])
}
