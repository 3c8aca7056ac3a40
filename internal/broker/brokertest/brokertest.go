package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
)

// Harness describes a backend under test.
type Harness struct {
	// New returns a fresh, empty backend for one test; it registers its own cleanup with t.Cleanup.
	New func(t *testing.T) *broker.Backend
	// MinLeaseTTL is the shortest lease TTL the backend supports (NATS: 1s). The suite also
	// uses it as the shortest presence ttl. Zero means one second.
	MinLeaseTTL time.Duration
	// ExpiryLag is how long after ExpiresAt an expired lease may still be visible (NATS: ~300ms).
	// The same lag is allowed for expired presence announcements.
	ExpiryLag time.Duration
	// ClaimRedelivery is how long an unacknowledged claim request may take to be delivered
	// again. Zero skips the claim redelivery test (for backends where it takes too long).
	ClaimRedelivery time.Duration
	// NewPeers returns two connections (two processes) to one fresh, empty engine, each
	// closed by its own t.Cleanup. Nil skips the contracts between processes (warm claims).
	NewPeers func(t *testing.T) (*broker.Backend, *broker.Backend)
	// ReadFenced is the writes of a lease holder the backend fences by a lease read only, not
	// in the store; the suite requires the store to refuse a stale holder's other writes.
	ReadFenced Writes
}

// Writes is a set of a lease holder's writes (Harness.ReadFenced).
type Writes int

// A lease holder's writes.
const (
	// RecordWrites is Fence.UpdateJob (the capability broker.FencedJobs).
	RecordWrites Writes = 1 << iota
	// ResultWrites is Fence.PublishResult (broker.FencedResults).
	ResultWrites
	// Settles is a fenced Delivery's Ack, Retry and DeadLetter (broker.FencedDelivery).
	Settles
)

// Timings shared by the tests. None of them is a guess about when something has happened:
// they bound how long a test waits for a condition before it fails.
const (
	// testTimeout bounds one subtest.
	testTimeout = 60 * time.Second
	// longTTL is a lease or announcement ttl that must not run out during a test.
	longTTL = 30 * time.Second
	// deliverWithin is how long an available message may take to arrive.
	deliverWithin = 5 * time.Second
	// settleWithin is how long a count may take to reflect an acknowledgement.
	settleWithin = 5 * time.Second
	// pollEvery is the polling interval of eventually.
	pollEvery = 20 * time.Millisecond
	// emptyWait is the Next wait used where nothing may be delivered.
	emptyWait = 500 * time.Millisecond
	// shortAckWait is the AckWait of tests that wait for a redelivery.
	shortAckWait = time.Second
	// cleanupTimeout bounds each cleanup step.
	cleanupTimeout = 10 * time.Second
)

// contract is one subtest: a promise from a port's doc comment and the test that checks it.
type contract struct {
	name string
	test func(t *testing.T, h Harness)
}

// group is the contracts of one port.
type group struct {
	name      string
	contracts []contract
}

// Run runs every contract test against h as subtests.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("expected Harness.New to be set")
	}
	h = h.withDefaults()
	for _, g := range groups() {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			runGroup(t, h, g)
		})
	}
}

func runGroup(t *testing.T, h Harness, g group) {
	for _, c := range g.contracts {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.test(t, h)
		})
	}
}

func groups() []group {
	return []group{
		{"Leases", leaseContracts()},
		{"Fence", fenceContracts()},
		{"Inbox", inboxContracts()},
		{"Front", frontContracts()},
		{"Claims", claimContracts()},
		{"ClaimStore", claimStoreContracts()},
		{"Results", resultContracts()},
		{"Signals", signalContracts()},
		{"Jobs", jobContracts()},
		{"Presence", presenceContracts()},
		{"Tables", tableContracts()},
		{"Blobs", blobContracts()},
		{"Context", contextContracts()},
	}
}

func (h Harness) withDefaults() Harness {
	if h.MinLeaseTTL <= 0 {
		h.MinLeaseTTL = time.Second
	}
	return h
}

// setup returns a context that ends with the test (or after testTimeout) and a fresh backend.
func (h Harness) setup(t *testing.T) (context.Context, *broker.Backend) {
	t.Helper()
	b := h.New(t)
	if b == nil {
		t.Fatal("expected Harness.New to return a backend, got nil")
	}
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx, b
}

// peers is setup for two connections to one engine; it skips the test without NewPeers.
func (h Harness) peers(t *testing.T) (context.Context, *broker.Backend, *broker.Backend) {
	t.Helper()
	if h.NewPeers == nil {
		t.Skip("Harness.NewPeers is nil: the contracts between processes are not tested")
	}
	a, b := h.NewPeers(t)
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx, a, b
}

// sleepPastExpiry waits out something just created with ttl: ttl plus the backend's expiry lag.
// Waiting out the ttl is the point of the tests that call it, so this is a sleep, not a poll.
func (h Harness) sleepPastExpiry(ttl time.Duration) {
	time.Sleep(ttl + h.ExpiryLag)
}
