package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
)

// The common contract of package broker: ctx bounds how long a method may block, and a
// cancelled ctx returns ctx.Err() unwrapped.

func contextContracts() []contract {
	return []contract{
		{"CancelledContext", testCancelledContext},
		{"DeadlineEndsBlockingCalls", testDeadlineEndsBlocking},
	}
}

// call is one port method invoked with a given context.
type call struct {
	name string
	do   func(ctx context.Context) error
}

// testCancelledContext: every method given a cancelled ctx either completes or returns
// ctx.Err() itself, not wrapped.
func testCancelledContext(t *testing.T, h Harness) {
	live, b := h.setup(t)
	q := openQueue(t, live, b.Inbox, tenantA, longTTL)
	ctx, cancel := context.WithCancel(live)
	cancel()
	for _, c := range portCalls(b, q) {
		t.Run(c.name, func(t *testing.T) {
			if err := c.do(ctx); err != nil && err != context.Canceled {
				t.Errorf("expected nil or context.Canceled unwrapped from a cancelled ctx, got %v", err)
			}
		})
	}
}

// portCalls lists a call of every port method that takes a context and does not settle a
// delivery.
func portCalls(b *broker.Backend, q broker.Queue) []call {
	return append(append(inboxCalls(b, q), leaseCalls(b)...), otherCalls(b)...)
}

func inboxCalls(b *broker.Backend, q broker.Queue) []call {
	return []call{
		{"Inbox.Publish", func(ctx context.Context) error { return b.Inbox.Publish(ctx, newJob(tenantA, 1)) }},
		{"Inbox.Open", func(ctx context.Context) error { return openAndClose(ctx, b.Inbox) }},
		{"Inbox.Pending", func(ctx context.Context) error { _, err := b.Inbox.Pending(ctx, tenantA); return err }},
		{"Inbox.Tenants", func(ctx context.Context) error { _, err := b.Inbox.Tenants(ctx); return err }},
		{"Inbox.DeadLetters", func(ctx context.Context) error { _, err := b.Inbox.DeadLetters(ctx, tenantA); return err }},
		{"Queue.Next", func(ctx context.Context) error { _, err := q.Next(ctx, time.Second); return err }},
	}
}

func leaseCalls(b *broker.Backend) []call {
	return []call{
		{"Leases.Acquire", func(ctx context.Context) error { _, err := b.Leases.Acquire(ctx, tenantC, "w", longTTL); return err }},
		{"Leases.Get", func(ctx context.Context) error { _, err := b.Leases.Get(ctx, tenantA); return noNotFound(err) }},
		{"Leases.List", func(ctx context.Context) error { _, err := b.Leases.List(ctx); return err }},
	}
}

func otherCalls(b *broker.Backend) []call {
	return []call{
		{"Claims.Request", func(ctx context.Context) error { return b.Claims.Request(ctx, tenantA, time.Now()) }},
		{"Claims.Next", func(ctx context.Context) error { _, err := b.Claims.Next(ctx); return err }},
		{"Claims.Waiting", func(ctx context.Context) error { _, err := b.Claims.Waiting(ctx); return err }},
		{"Results.Publish", func(ctx context.Context) error { return b.Results.Publish(ctx, newResult(tenantA, 1)) }},
		{"Results.Next", func(ctx context.Context) error { _, err := b.Results.Next(ctx); return err }},
		{"Signals.Interrupt", func(ctx context.Context) error { return b.Signals.Interrupt(ctx, tenantA, broker.Interrupt{}) }},
		{"Signals.Watch", func(ctx context.Context) error { return stopIfWatching(b.Signals.Watch(ctx, tenantA)) }},
		{"Jobs.Create", func(ctx context.Context) error { return b.Jobs.Create(ctx, newRecord(tenantA, 1)) }},
		{"Jobs.Get", func(ctx context.Context) error { _, err := b.Jobs.Get(ctx, broker.NewJobID()); return noNotFound(err) }},
		{"Jobs.Recent", func(ctx context.Context) error { _, err := b.Jobs.Recent(ctx, 10); return err }},
		{"Jobs.Wait", func(ctx context.Context) error { _, err := b.Jobs.Wait(ctx, broker.NewJobID(), never); return err }},
		{"Presence.Announce", func(ctx context.Context) error { return b.Presence.Announce(ctx, newWorker("w", "idle"), longTTL) }},
		{"Presence.List", func(ctx context.Context) error { _, err := b.Presence.List(ctx); return err }},
	}
}

// testDeadlineEndsBlockingCalls: a call that blocks until something arrives returns
// context.DeadlineExceeded, unwrapped, soon after its ctx's deadline.
func testDeadlineEndsBlocking(t *testing.T, h Harness) {
	live, b := h.setup(t)
	blocking := []call{
		{"Claims.Next", func(ctx context.Context) error { _, err := b.Claims.Next(ctx); return err }},
		{"Results.Next", func(ctx context.Context) error { _, err := b.Results.Next(ctx); return err }},
		{"Jobs.Wait", func(ctx context.Context) error { _, err := b.Jobs.Wait(ctx, broker.NewJobID(), never); return err }},
	}
	for _, c := range blocking {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			expectDeadline(t, live, c)
		})
	}
}

// expectDeadline runs c with a deadline of emptyWait and expects context.DeadlineExceeded,
// unwrapped, within about that time.
func expectDeadline(t *testing.T, live context.Context, c call) {
	t.Helper()
	ctx, cancel := context.WithTimeout(live, emptyWait)
	defer cancel()
	start := time.Now()
	err := c.do(ctx)
	if err != context.DeadlineExceeded {
		t.Errorf("expected context.DeadlineExceeded unwrapped when the deadline passed, got %v", err)
	}
	if elapsed := time.Since(start); elapsed > emptyWait+time.Second {
		t.Errorf("expected to return soon after the %v deadline, took %v", emptyWait, elapsed)
	}
}

func never(broker.JobRecord) bool { return false }

// noNotFound treats ErrNotFound as success: with a live ctx it is the right answer.
func noNotFound(err error) error {
	if err == broker.ErrNotFound {
		return nil
	}
	return err
}

// openAndClose opens a queue and, if that worked, closes it again.
func openAndClose(ctx context.Context, inbox broker.Inbox) error {
	q, err := inbox.Open(ctx, tenantB, broker.QueueOptions{})
	if err == nil {
		ctx, cancel := cleanupContext()
		defer cancel()
		_ = q.Close(ctx)
	}
	return err
}

func stopIfWatching(_ <-chan broker.Interrupt, stop func(), err error) error {
	if err == nil {
		stop()
	}
	return err
}
