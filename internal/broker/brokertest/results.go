package brokertest

import (
	"context"
	"testing"

	"github.com/webordinary/webordinary/internal/broker"
)

func resultContracts() []contract {
	return []contract{
		{"PublishNextAck", testResultsPublishNextAck},
		{"RepublishIsNoOp", testResultsRepublish},
	}
}

// testResultsPublishNextAck: a published result is delivered whole; once acknowledged it is
// not delivered again.
func testResultsPublishNextAck(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	r := newResult(tenantA, 1)
	fatalIfErr(t, b.Results.Publish(ctx, r), "publish a result")
	d := expectResult(t, ctx, b.Results)
	if !sameResult(d.Result(), r) {
		t.Errorf("expected result %+v, got %+v", r, d.Result())
	}
	fatalIfErr(t, d.Ack(ctx), "ack a result")
	fatalIfErr(t, d.Ack(ctx), "ack a result twice")
	expectNoResult(t, ctx, b.Results)
}

// testResultsRepublish: publishing a result for the same job id again delivers it once.
func testResultsRepublish(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	r, other := newResult(tenantA, 1), newResult(tenantB, 2)
	for _, res := range []broker.Result{r, r, other} {
		fatalIfErr(t, b.Results.Publish(ctx, res), "publish a result")
	}
	seen := map[string]int{}
	for range 2 {
		d := expectResult(t, ctx, b.Results)
		seen[d.Result().JobID]++
		fatalIfErr(t, d.Ack(ctx), "ack a result")
	}
	if seen[r.JobID] != 1 || seen[other.JobID] != 1 {
		t.Errorf("expected each of %s and %s delivered once, got %v", r.JobID, other.JobID, seen)
	}
	expectNoResult(t, ctx, b.Results)
}

func expectResult(t *testing.T, ctx context.Context, results broker.Results) broker.ResultDelivery {
	t.Helper()
	d, err := results.Next(withTimeout(t, ctx, deliverWithin))
	fatalIfErr(t, err, "next result")
	return d
}

// expectNoResult expects Next to block until its context ends.
func expectNoResult(t *testing.T, ctx context.Context, results broker.Results) {
	t.Helper()
	d, err := results.Next(withTimeout(t, ctx, emptyWait))
	if err == nil {
		t.Fatalf("expected no more results, got %+v", d.Result())
	}
	expectErr(t, err, context.DeadlineExceeded, "next result on an empty stream")
}
