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
		{"RequestsAreNeverSwallowed", testClaimsNeverSwallowed},
		{"UnackedClaimIsRedelivered", testClaimRedelivered},
	}
}

// testClaimsNeverSwallowed: identical requests back to back are each delivered, Waiting
// counts the ones not yet handed out, and an acknowledged request does not come back.
func testClaimsNeverSwallowed(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	const n = 5
	for range n {
		fatalIfErr(t, b.Claims.Request(ctx, tenantA), "request a claim")
	}
	eventuallyWaiting(t, ctx, b.Claims, n)
	first, second := expectClaim(t, ctx, b.Claims, tenantA), expectClaim(t, ctx, b.Claims, tenantA)
	eventuallyWaiting(t, ctx, b.Claims, n-2)
	fatalIfErr(t, first.Ack(ctx), "ack a claim")
	fatalIfErr(t, first.Ack(ctx), "ack a claim twice")
	fatalIfErr(t, second.Ack(ctx), "ack a claim")
	for range n - 2 {
		fatalIfErr(t, expectClaim(t, ctx, b.Claims, tenantA).Ack(ctx), "ack a claim")
	}
	eventuallyWaiting(t, ctx, b.Claims, 0)
	expectNoClaim(t, ctx, b.Claims)
}

// testClaimRedelivered: a claim that is not acknowledged is delivered again later.
func testClaimRedelivered(t *testing.T, h Harness) {
	if h.ClaimRedelivery == 0 {
		t.Skip("Harness.ClaimRedelivery is zero: the backend redelivers claims too slowly to test")
	}
	ctx, b := h.setup(t)
	fatalIfErr(t, b.Claims.Request(ctx, tenantA), "request a claim")
	expectClaim(t, ctx, b.Claims, tenantA)
	again := expectClaimWithin(t, ctx, b.Claims, tenantA, h.ClaimRedelivery+deliverWithin)
	fatalIfErr(t, again.Ack(ctx), "ack the redelivered claim")
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
