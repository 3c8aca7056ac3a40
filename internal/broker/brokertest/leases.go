package brokertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

func leaseContracts() []contract {
	return []contract{
		{"AcquireDescribesLease", testAcquireDescribesLease},
		{"AcquireIsExclusive", testAcquireIsExclusive},
		{"TokensIncrease", testTokensIncrease},
		{"RenewKeepsTokenMovesExpiry", testRenewKeepsToken},
		{"RenewAfterExpiryIsLost", testRenewAfterExpiry},
		{"ExpiredLeaseIsGone", testExpiredLeaseIsGone},
		{"ReleaseIsCompareAndDelete", testReleaseStale},
		{"ReleasedLeaseIsLost", testReleasedLeaseIsLost},
		{"GetAndList", testLeaseGetAndList},
		{"RenewKeepsLeaseAlive", testRenewKeepsAlive},
	}
}

// testAcquireDescribesLease: the lease Acquire returns names the tenant, owner and ttl, and
// expires in the future.
func testAcquireDescribesLease(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	before := time.Now()
	l := mustAcquire(t, ctx, b.Leases, tenantA, "worker-1", longTTL)
	if l.Tenant != tenantA || l.Owner != "worker-1" || l.TTL != longTTL {
		t.Errorf("expected a lease of %s for worker-1 with ttl %v, got %+v", tenantA, longTTL, l)
	}
	if l.Token == 0 {
		t.Errorf("expected a non-zero fencing token, got %+v", l)
	}
	if !l.ExpiresAt.After(before.Add(longTTL / 2)) {
		t.Errorf("expected the lease to expire about %v from now, got ExpiresAt %v", longTTL, l.ExpiresAt)
	}
}

// testAcquireIsExclusive: exactly one of many concurrent Acquires wins, round after round.
func testAcquireIsExclusive(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	var last uint64
	for round := range 3 {
		winner := raceAcquire(t, ctx, b.Leases, tenantA, 20)
		if winner.Token <= last {
			t.Errorf("round %d: expected a token above %d, got %d", round, last, winner.Token)
		}
		last = winner.Token
		fatalIfErr(t, b.Leases.Release(ctx, winner), "release the winner")
	}
}

// raceAcquire has n owners Acquire t at once and returns the single winner's lease.
func raceAcquire(t *testing.T, ctx context.Context, leases broker.Leases, tn tenant.ID, n int) broker.Lease {
	t.Helper()
	leasesGot := make([]broker.Lease, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			leasesGot[i], errs[i] = leases.Acquire(ctx, tn, fmt.Sprintf("worker-%d", i), longTTL)
		})
	}
	close(start)
	wg.Wait()
	return oneWinner(t, leasesGot, errs)
}

// oneWinner checks that exactly one Acquire succeeded and every other one got ErrLeaseHeld.
func oneWinner(t *testing.T, leases []broker.Lease, errs []error) broker.Lease {
	t.Helper()
	var winners []broker.Lease
	for i, err := range errs {
		switch {
		case err == nil:
			winners = append(winners, leases[i])
		case !errors.Is(err, broker.ErrLeaseHeld):
			t.Errorf("worker-%d: expected success or ErrLeaseHeld, got %v", i, err)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("expected exactly one of %d concurrent acquires to win, got %d: %+v", len(errs), len(winners), winners)
	}
	return winners[0]
}

// testTokensIncrease: every acquisition of a tenant's lease gets a token greater than the
// tenant's earlier ones; tenants' tokens need not be ordered with one another (a backend may
// keep leases in several streams, each with its own sequence).
func testTokensIncrease(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	first := mustAcquire(t, ctx, b.Leases, tenantA, "worker-1", longTTL)
	other := mustAcquire(t, ctx, b.Leases, tenantB, "worker-3", longTTL)
	fatalIfErr(t, b.Leases.Release(ctx, first), "release")
	again := mustAcquire(t, ctx, b.Leases, tenantA, "worker-2", longTTL)
	if !(first.Token < again.Token) || other.Token == 0 {
		t.Errorf("expected strictly increasing tokens per tenant, got %d (%s), %d (%s after release); %d (%s)",
			first.Token, tenantA, again.Token, tenantA, other.Token, tenantB)
	}
}

// testRenewKeepsToken: Renew keeps the token and owner and moves ExpiresAt forward.
func testRenewKeepsToken(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	l := mustAcquire(t, ctx, b.Leases, tenantA, "worker-1", longTTL)
	renewed, err := b.Leases.Renew(ctx, l)
	fatalIfErr(t, err, "renew")
	if !sameHolder(renewed, l) {
		t.Errorf("expected renew to keep tenant, owner and token of %+v, got %+v", l, renewed)
	}
	if !renewed.ExpiresAt.After(l.ExpiresAt) {
		t.Errorf("expected renew to move ExpiresAt past %v, got %v", l.ExpiresAt, renewed.ExpiresAt)
	}
	again, err := b.Leases.Renew(ctx, renewed)
	fatalIfErr(t, err, "renew the renewed lease")
	if again.Token != l.Token {
		t.Errorf("expected a second renew to keep token %d, got %d", l.Token, again.Token)
	}
}

// testRenewAfterExpiry: renewing an expired lease fails with ErrLeaseLost and does not bring it
// back: another owner can then acquire, and a stale renew leaves that owner's lease alone.
func testRenewAfterExpiry(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	l := mustAcquire(t, ctx, b.Leases, tenantA, "worker-1", h.MinLeaseTTL)
	h.sleepPastExpiry(h.MinLeaseTTL)
	_, err := b.Leases.Renew(ctx, l)
	expectErr(t, err, broker.ErrLeaseLost, "renew after expiry")
	next := mustAcquire(t, ctx, b.Leases, tenantA, "worker-2", longTTL)
	if next.Token <= l.Token {
		t.Errorf("expected the new owner's token above %d, got %d", l.Token, next.Token)
	}
	_, err = b.Leases.Renew(ctx, l)
	expectErr(t, err, broker.ErrLeaseLost, "stale renew after another owner acquired")
	expectHolder(t, ctx, b.Leases, next)
}

// testExpiredLeaseIsGone: once a lease's ttl and the backend's lag have passed, Get and List
// no longer return it.
func testExpiredLeaseIsGone(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	mustAcquire(t, ctx, b.Leases, tenantA, "worker-1", h.MinLeaseTTL)
	live := mustAcquire(t, ctx, b.Leases, tenantB, "worker-2", longTTL)
	h.sleepPastExpiry(h.MinLeaseTTL)
	_, err := b.Leases.Get(ctx, tenantA)
	expectErr(t, err, broker.ErrNotFound, "get an expired lease")
	expectLeaseList(t, ctx, b.Leases, live)
}

// testReleaseStale: releasing a lease that expired and was re-acquired by another owner
// returns ErrLeaseLost and leaves the new owner's lease in place.
func testReleaseStale(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	stale := mustAcquire(t, ctx, b.Leases, tenantA, "worker-1", h.MinLeaseTTL)
	h.sleepPastExpiry(h.MinLeaseTTL)
	current := mustAcquire(t, ctx, b.Leases, tenantA, "worker-2", longTTL)
	expectErr(t, b.Leases.Release(ctx, stale), broker.ErrLeaseLost, "release a stale lease")
	expectHolder(t, ctx, b.Leases, current)
}

// testReleasedLeaseIsLost: after Release, the lease is gone and releasing or renewing it
// again reports ErrLeaseLost.
func testReleasedLeaseIsLost(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	l := mustAcquire(t, ctx, b.Leases, tenantA, "worker-1", longTTL)
	fatalIfErr(t, b.Leases.Release(ctx, l), "release")
	_, err := b.Leases.Get(ctx, tenantA)
	expectErr(t, err, broker.ErrNotFound, "get a released lease")
	expectErr(t, b.Leases.Release(ctx, l), broker.ErrLeaseLost, "release twice")
	_, err = b.Leases.Renew(ctx, l)
	expectErr(t, err, broker.ErrLeaseLost, "renew a released lease")
}

// testLeaseGetAndList: Get returns ErrNotFound without a lease and the holder with one;
// List returns exactly the live leases.
func testLeaseGetAndList(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	_, err := b.Leases.Get(ctx, tenantA)
	expectErr(t, err, broker.ErrNotFound, "get without a lease")
	expectLeaseList(t, ctx, b.Leases)
	a := mustAcquire(t, ctx, b.Leases, tenantA, "worker-1", longTTL)
	bl := mustAcquire(t, ctx, b.Leases, tenantB, "worker-2", longTTL)
	expectHolder(t, ctx, b.Leases, a)
	expectLeaseList(t, ctx, b.Leases, a, bl)
	fatalIfErr(t, b.Leases.Release(ctx, a), "release")
	expectLeaseList(t, ctx, b.Leases, bl)
}

// testRenewKeepsAlive: a lease renewed every third of its ttl outlives several ttls, and
// nobody else can take it meanwhile.
func testRenewKeepsAlive(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	// Three times the minimum ttl: a renewal every third of it still has room on a loaded machine.
	ttl := 3 * h.MinLeaseTTL
	l := mustAcquire(t, ctx, b.Leases, tenantA, "worker-1", ttl)
	l = renewFor(t, ctx, b.Leases, l, 3*ttl)
	expectHolder(t, ctx, b.Leases, l)
	_, err := b.Leases.Acquire(ctx, tenantA, "worker-2", longTTL)
	expectErr(t, err, broker.ErrLeaseHeld, "acquire a lease kept alive by renewals")
}

// renewFor renews l every third of its ttl until d has passed, and returns the last renewal.
func renewFor(t *testing.T, ctx context.Context, leases broker.Leases, l broker.Lease, d time.Duration) broker.Lease {
	t.Helper()
	tick := time.NewTicker(l.TTL / 3)
	defer tick.Stop()
	for end := time.Now().Add(d); time.Now().Before(end); {
		<-tick.C
		renewed, err := leases.Renew(ctx, l)
		fatalIfErr(t, err, fmt.Sprintf("renew of a lease with ttl %v renewed every %v", l.TTL, l.TTL/3))
		l = renewed
	}
	return l
}

func mustAcquire(t *testing.T, ctx context.Context, leases broker.Leases, tn tenant.ID, owner string, ttl time.Duration) broker.Lease {
	t.Helper()
	l, err := leases.Acquire(ctx, tn, owner, ttl)
	fatalIfErr(t, err, fmt.Sprintf("acquire %s for %s", tn, owner))
	return l
}

// expectHolder checks that Get returns want's acquisition.
func expectHolder(t *testing.T, ctx context.Context, leases broker.Leases, want broker.Lease) {
	t.Helper()
	got, err := leases.Get(ctx, want.Tenant)
	fatalIfErr(t, err, fmt.Sprintf("get the lease of %s", want.Tenant))
	if !sameHolder(got, want) {
		t.Errorf("expected the lease of %s held by %s with token %d, got %+v", want.Tenant, want.Owner, want.Token, got)
	}
}

// expectLeaseList checks that List returns exactly want's acquisitions, in any order.
func expectLeaseList(t *testing.T, ctx context.Context, leases broker.Leases, want ...broker.Lease) {
	t.Helper()
	got, err := leases.List(ctx)
	fatalIfErr(t, err, "list leases")
	if len(got) != len(want) {
		t.Fatalf("expected %d live leases %+v, got %d: %+v", len(want), want, len(got), got)
	}
	for _, w := range want {
		if !containsHolder(got, w) {
			t.Errorf("expected the lease list to hold %s for %s with token %d, got %+v", w.Tenant, w.Owner, w.Token, got)
		}
	}
}

func containsHolder(leases []broker.Lease, want broker.Lease) bool {
	for _, l := range leases {
		if sameHolder(l, want) {
			return true
		}
	}
	return false
}
