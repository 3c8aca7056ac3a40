package brokertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

func signalContracts() []contract {
	return []contract{
		{"WatchDeliversTenantsInterrupts", testWatchDelivers},
		{"StopEndsDelivery", testStopEndsDelivery},
	}
}

// testWatchDelivers: a watcher receives its tenant's interrupts, and not another tenant's.
func testWatchDelivers(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	inA, _ := watch(t, ctx, b.Signals, tenantA)
	inB, _ := watch(t, ctx, b.Signals, tenantB)
	forA := broker.Interrupt{JobID: broker.NewJobID(), Reason: "for a"}
	forB := broker.Interrupt{Before: broker.NewJobID(), Reason: "for b"}
	fatalIfErr(t, b.Signals.Interrupt(ctx, tenantA, forA), "interrupt")
	fatalIfErr(t, b.Signals.Interrupt(ctx, tenantB, forB), "interrupt")
	expectInterrupt(t, inA, tenantA, forA)
	expectInterrupt(t, inB, tenantB, forB)
}

// testStopEndsDelivery: after stop, interrupts are no longer delivered.
func testStopEndsDelivery(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	in, stop := watch(t, ctx, b.Signals, tenantA)
	first := broker.Interrupt{JobID: broker.NewJobID(), Reason: "first"}
	fatalIfErr(t, b.Signals.Interrupt(ctx, tenantA, first), "interrupt")
	expectInterrupt(t, in, tenantA, first)
	stop()
	fatalIfErr(t, b.Signals.Interrupt(ctx, tenantA, broker.Interrupt{Reason: "after stop"}), "interrupt after stop")
	expectNoInterrupt(t, in)
}

// watch watches tn and stops watching when the test ends, if stop was not called before.
func watch(t *testing.T, ctx context.Context, signals broker.Signals, tn tenant.ID) (<-chan broker.Interrupt, func()) {
	t.Helper()
	in, stop, err := signals.Watch(ctx, tn)
	fatalIfErr(t, err, "watch "+tn.String())
	stopOnce := sync.OnceFunc(stop)
	t.Cleanup(stopOnce)
	return in, stopOnce
}

func expectInterrupt(t *testing.T, in <-chan broker.Interrupt, tn tenant.ID, want broker.Interrupt) {
	t.Helper()
	select {
	case got, ok := <-in:
		if !ok {
			t.Fatalf("expected interrupt %+v for %s, got a closed channel", want, tn)
		}
		if got != want {
			t.Errorf("expected interrupt %+v for %s, got %+v", want, tn, got)
		}
	case <-time.After(deliverWithin):
		t.Fatalf("expected interrupt %+v for %s within %v, got none", want, tn, deliverWithin)
	}
}

// expectNoInterrupt expects the channel to stay quiet (or be closed) for emptyWait.
func expectNoInterrupt(t *testing.T, in <-chan broker.Interrupt) {
	t.Helper()
	select {
	case got, ok := <-in:
		if ok {
			t.Errorf("expected no interrupt after stop, got %+v", got)
		}
	case <-time.After(emptyWait):
	}
}
