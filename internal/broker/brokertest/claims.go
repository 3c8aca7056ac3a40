package brokertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

func claimContracts() []contract {
	return []contract{
		{"OldestSinceFirst", testClaimsOldestFirst},
		{"RepeatsMergeAndKeepTheirPlace", testClaimsMerge},
		{"RequestDuringHandOutIsNotLost", testClaimRequestedWhileHandedOut},
		{"AckedRequestsEndAndNewOnesCount", testClaimsAcked},
		{"UnackedClaimIsRedelivered", testClaimRedelivered},
	}
}

// testClaimsOldestFirst: requests are handed out oldest since first, whatever order they were
// made in; the zero since goes before any dated one.
func testClaimsOldestFirst(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	now := time.Now()
	request(t, ctx, b.Claims, tenantA, now)
	request(t, ctx, b.Claims, tenantB, now.Add(-time.Minute))
	request(t, ctx, b.Claims, tenantC, time.Time{})
	eventuallyWaiting(t, ctx, b.Claims, 3)
	for _, want := range []tenant.ID{tenantC, tenantB, tenantA} {
		fatalIfErr(t, expectClaim(t, ctx, b.Claims, want).Ack(ctx), "ack a claim")
	}
	expectNoClaim(t, ctx, b.Claims)
}

// testClaimsMerge: asking again for a tenant with a request waiting adds nothing and keeps its
// place; an earlier since moves it forward.
func testClaimsMerge(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	now := time.Now()
	request(t, ctx, b.Claims, tenantA, now.Add(-2*time.Second))
	request(t, ctx, b.Claims, tenantB, now.Add(-time.Second))
	request(t, ctx, b.Claims, tenantC, now)
	for range 3 {
		request(t, ctx, b.Claims, tenantA, now) // later: A keeps its place
	}
	request(t, ctx, b.Claims, tenantC, now.Add(-time.Minute)) // earlier: C moves to the front
	eventuallyWaiting(t, ctx, b.Claims, 3)
	for _, want := range []tenant.ID{tenantC, tenantA, tenantB} {
		fatalIfErr(t, expectClaim(t, ctx, b.Claims, want).Ack(ctx), "ack a claim")
	}
	eventuallyWaiting(t, ctx, b.Claims, 0)
	expectNoClaim(t, ctx, b.Claims)
}

// testClaimRequestedWhileHandedOut: a request made while the tenant's previous one is handed
// out survives that one's acknowledgement (the worker may have dropped it as held).
func testClaimRequestedWhileHandedOut(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	request(t, ctx, b.Claims, tenantA, time.Now())
	first := expectClaim(t, ctx, b.Claims, tenantA)
	eventuallyWaiting(t, ctx, b.Claims, 0)
	request(t, ctx, b.Claims, tenantA, time.Now())
	eventuallyWaiting(t, ctx, b.Claims, 1)
	fatalIfErr(t, first.Ack(ctx), "ack the first claim")
	again := expectClaim(t, ctx, b.Claims, tenantA)
	fatalIfErr(t, again.Ack(ctx), "ack the second claim")
	expectNoClaim(t, ctx, b.Claims)
}

// testClaimsAcked: an acknowledged request does not come back (acking twice is fine), and a
// request made after the acknowledgement is delivered: requests are never swallowed.
func testClaimsAcked(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	request(t, ctx, b.Claims, tenantA, time.Now())
	c := expectClaim(t, ctx, b.Claims, tenantA)
	fatalIfErr(t, c.Ack(ctx), "ack a claim")
	fatalIfErr(t, c.Ack(ctx), "ack a claim twice")
	eventuallyWaiting(t, ctx, b.Claims, 0)
	expectNoClaim(t, ctx, b.Claims)
	request(t, ctx, b.Claims, tenantA, time.Now())
	fatalIfErr(t, expectClaim(t, ctx, b.Claims, tenantA).Ack(ctx), "ack the new claim")
}

// testClaimRedelivered: a claim that is not acknowledged is delivered again later, before
// requests made after it.
func testClaimRedelivered(t *testing.T, h Harness) {
	if h.ClaimRedelivery == 0 {
		t.Skip("Harness.ClaimRedelivery is zero: the backend redelivers claims too slowly to test")
	}
	ctx, b := h.setup(t)
	request(t, ctx, b.Claims, tenantA, time.Now().Add(-time.Second))
	request(t, ctx, b.Claims, tenantB, time.Now())
	expectClaim(t, ctx, b.Claims, tenantA)
	// Waiting out the hand-out is the point here: then A is first in line again.
	time.Sleep(h.ClaimRedelivery + redeliverySlack)
	again := expectClaim(t, ctx, b.Claims, tenantA)
	fatalIfErr(t, again.Ack(ctx), "ack the redelivered claim")
	fatalIfErr(t, expectClaim(t, ctx, b.Claims, tenantB).Ack(ctx), "ack the later claim")
}

// redeliverySlack is allowed past Harness.ClaimRedelivery for a hand-out to run out.
const redeliverySlack = 500 * time.Millisecond

func request(t *testing.T, ctx context.Context, claims broker.Claims, tn tenant.ID, since time.Time) {
	t.Helper()
	fatalIfErr(t, claims.Request(ctx, tn, since), "request a claim for "+tn.String())
}

// expectClaim expects a claim for want within deliverWithin.
func expectClaim(t *testing.T, ctx context.Context, claims broker.Claims, want tenant.ID) broker.Claim {
	t.Helper()
	return expectClaimWithin(t, ctx, claims, want, deliverWithin)
}

func expectClaimWithin(t *testing.T, ctx context.Context, claims broker.Claims, want tenant.ID, within time.Duration) broker.Claim {
	t.Helper()
	c, err := claims.Next(withTimeout(t, ctx, within))
	fatalIfErr(t, err, fmt.Sprintf("next claim, expecting one for %s", want))
	if c.Tenant() != want {
		t.Errorf("expected a claim for %s, got one for %s", want, c.Tenant())
	}
	return c
}

// expectNoClaim expects Next to block until its context ends.
func expectNoClaim(t *testing.T, ctx context.Context, claims broker.Claims) {
	t.Helper()
	c, err := claims.Next(withTimeout(t, ctx, emptyWait))
	if err == nil {
		t.Fatalf("expected no more claims, got one for %s", c.Tenant())
	}
	expectErr(t, err, context.DeadlineExceeded, "next claim on an empty queue")
}

func eventuallyWaiting(t *testing.T, ctx context.Context, claims broker.Claims, want int) {
	t.Helper()
	eventually(t, settleWithin, func() error {
		got, err := claims.Waiting(ctx)
		if err != nil {
			return fmt.Errorf("waiting claims: expected no error, got %w", err)
		}
		if got != want {
			return fmt.Errorf("expected %d claims waiting, got %d", want, got)
		}
		return nil
	})
}
