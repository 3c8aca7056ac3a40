package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
)

func presenceContracts() []contract {
	return []contract{
		{"AnnounceListLeave", testPresenceAnnounceListLeave},
		{"AnnouncementExpires", testPresenceExpires},
		{"ReannounceKeepsAlive", testPresenceReannounce},
	}
}

// testPresenceAnnounceListLeave: List shows the latest announcement of each worker; Leave
// removes one at once and is idempotent.
func testPresenceAnnounceListLeave(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	w1, w2 := newWorker("worker-1", "idle"), newWorker("worker-2", "idle")
	announce(t, ctx, b.Presence, w1, longTTL)
	announce(t, ctx, b.Presence, w2, longTTL)
	expectWorkers(t, ctx, b.Presence, w1, w2)
	w2.State, w2.Tenant, w2.JobID = "running", tenantA.String(), broker.NewJobID()
	announce(t, ctx, b.Presence, w2, longTTL)
	expectWorkers(t, ctx, b.Presence, w1, w2)
	fatalIfErr(t, b.Presence.Leave(ctx, w1.ID), "leave")
	expectWorkers(t, ctx, b.Presence, w2)
	fatalIfErr(t, b.Presence.Leave(ctx, w1.ID), "leave twice")
	fatalIfErr(t, b.Presence.Leave(ctx, "never-announced"), "leave an unknown worker")
	expectWorkers(t, ctx, b.Presence, w2)
}

// testPresenceExpires: an announcement not repeated is gone after its ttl (and the lag).
func testPresenceExpires(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	short, long := newWorker("worker-1", "idle"), newWorker("worker-2", "idle")
	announce(t, ctx, b.Presence, short, h.MinLeaseTTL)
	announce(t, ctx, b.Presence, long, longTTL)
	h.sleepPastExpiry(h.MinLeaseTTL)
	expectWorkers(t, ctx, b.Presence, long)
}

// testPresenceReannounce: a worker announcing every third of its ttl stays listed. The ttl is
// at least two seconds, so that a loaded machine (or the race detector) delaying a tick or the
// final list by a second does not let the announcement lapse.
func testPresenceReannounce(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	w := newWorker("worker-1", "idle")
	ttl := max(h.MinLeaseTTL, 2*time.Second)
	tick := time.NewTicker(ttl / 3)
	defer tick.Stop()
	for end := time.Now().Add(3 * ttl); time.Now().Before(end); <-tick.C {
		w.Heartbeat = time.Now().UTC()
		announce(t, ctx, b.Presence, w, ttl)
	}
	expectWorkers(t, ctx, b.Presence, w)
}

func announce(t *testing.T, ctx context.Context, presence broker.Presence, w broker.WorkerInfo, ttl time.Duration) {
	t.Helper()
	fatalIfErr(t, presence.Announce(ctx, w, ttl), "announce "+w.ID)
}

// expectWorkers checks that List returns exactly want, in any order.
func expectWorkers(t *testing.T, ctx context.Context, presence broker.Presence, want ...broker.WorkerInfo) {
	t.Helper()
	got, err := presence.List(ctx)
	fatalIfErr(t, err, "list workers")
	if len(got) != len(want) {
		t.Fatalf("expected %d live workers %+v, got %d: %+v", len(want), want, len(got), got)
	}
	for _, w := range want {
		if !containsWorker(got, w) {
			t.Errorf("expected the worker list to hold %+v, got %+v", w, got)
		}
	}
}

func containsWorker(workers []broker.WorkerInfo, want broker.WorkerInfo) bool {
	for _, w := range workers {
		if sameWorker(w, want) {
			return true
		}
	}
	return false
}
