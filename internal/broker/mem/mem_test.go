package mem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/mem"
	"github.com/webordinary/webordinary/internal/tenant"
)

var alice = tenant.ID{Project: "site", User: "alice"}

func job(n int) broker.Job {
	return broker.Job{ID: broker.NewJobID(), Tenant: alice, Thread: "t1", Payload: []byte(fmt.Sprintf(`"job %d"`, n)), AcceptedAt: time.Now()}
}

// setup returns an engine closed at the end of the test and a context for its calls.
func setup(t *testing.T, cfg mem.Config) (*mem.Engine, context.Context) {
	t.Helper()
	e := mem.NewEngine(cfg)
	t.Cleanup(func() { _ = e.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return e, ctx
}

func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: expected no error, got %v", what, err)
	}
}

// TestClosedClientIsCutOthersGoOn: a closed client's calls return ErrClosed, its blocked
// calls return at once, and the other clients of the engine are untouched.
func TestClosedClientIsCutOthersGoOn(t *testing.T) {
	t.Parallel()
	e, ctx := setup(t, mem.Config{})
	crashed, other := e.Connect(), e.Connect()
	q, err := crashed.Inbox.Open(ctx, alice, broker.QueueOptions{})
	must(t, err, "open")
	blocked := []func() error{
		func() error { _, err := crashed.Claims.Next(ctx); return err },
		func() error { _, err := crashed.Results.Next(ctx); return err },
		func() error {
			_, err := crashed.Jobs.Wait(ctx, "j1", func(broker.JobRecord) bool { return false })
			return err
		},
		func() error { _, err := q.Next(ctx, time.Minute); return err },
	}
	errs := make(chan error, len(blocked))
	for _, call := range blocked {
		go func() { errs <- call() }()
	}
	time.Sleep(50 * time.Millisecond) // let them block: this test is about unblocking
	must(t, crashed.Close(), "close")
	for range blocked {
		select {
		case err := <-errs:
			if !errors.Is(err, mem.ErrClosed) {
				t.Errorf("blocked call: expected ErrClosed, got %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a blocked call did not return after its client closed")
		}
	}
	if err := crashed.Inbox.Publish(ctx, job(1)); !errors.Is(err, mem.ErrClosed) {
		t.Errorf("publish on a closed client: expected ErrClosed, got %v", err)
	}
	must(t, other.Inbox.Publish(ctx, job(2)), "publish on another client")
	if n, err := other.Inbox.Pending(ctx, alice); err != nil || n != 1 {
		t.Errorf("pending on another client: expected 1, got %d, %v", n, err)
	}
}

// TestCrashedOwnersDeliveryComesAgainAtOnce: the next Open gets a crashed client's unsettled
// delivery at once, and the crashed owner can no longer settle it.
func TestCrashedOwnersDeliveryComesAgainAtOnce(t *testing.T) {
	t.Parallel()
	e, ctx := setup(t, mem.Config{})
	crashed, heir := e.Connect(), e.Connect()
	first := job(1)
	must(t, heir.Inbox.Publish(ctx, first), "publish")
	q, err := crashed.Inbox.Open(ctx, alice, broker.QueueOptions{AckWait: time.Hour})
	must(t, err, "open")
	stale, err := q.Next(ctx, time.Second)
	must(t, err, "next")
	must(t, crashed.Close(), "close")
	hq, err := heir.Inbox.Open(ctx, alice, broker.QueueOptions{AckWait: time.Hour})
	must(t, err, "open again")
	d, err := hq.Next(ctx, 0)
	if err != nil || d.Job().ID != first.ID || d.Attempt() != 1 {
		t.Fatalf("expected %s at once on attempt 1 to the new consumer, got %v, %v", first.ID, d, err)
	}
	must(t, d.Ack(ctx), "ack")
	must(t, d.Ack(ctx), "ack twice")
	_ = stale
}

// TestStaleDeliveryCannotSettle: once another Open replaced a consumer, the old owner's
// delivery settles nothing: its Ack fails and the message stays for the new owner.
func TestStaleDeliveryCannotSettle(t *testing.T) {
	t.Parallel()
	e, ctx := setup(t, mem.Config{})
	b := e.Connect()
	must(t, b.Inbox.Publish(ctx, job(1)), "publish")
	old, err := b.Inbox.Open(ctx, alice, broker.QueueOptions{})
	must(t, err, "open")
	d, err := old.Next(ctx, time.Second)
	must(t, err, "next")
	next, err := b.Inbox.Open(ctx, alice, broker.QueueOptions{})
	must(t, err, "open again")
	for name, settle := range map[string]func() error{
		"ack":         func() error { return d.Ack(ctx) },
		"retry":       func() error { return d.Retry(ctx, 0) },
		"extend":      func() error { return d.Extend(ctx) },
		"dead-letter": func() error { return d.DeadLetter(ctx, "x") },
	} {
		if err := settle(); err == nil {
			t.Errorf("%s of a stale delivery: expected an error, got nil", name)
		}
	}
	if _, err := old.Next(ctx, 0); err == nil || errors.Is(err, broker.ErrNoMessage) {
		t.Errorf("next on a replaced queue: expected an error, got %v", err)
	}
	must(t, old.Close(ctx), "close the replaced queue") // must not close the new one
	if n, _ := b.Inbox.Pending(ctx, alice); n != 1 {
		t.Fatalf("expected the message to stay after stale settles, pending %d", n)
	}
	again, err := next.Next(ctx, time.Second)
	must(t, err, "next on the new queue")
	must(t, again.Ack(ctx), "ack on the new queue")
	dls, _ := b.Inbox.DeadLetters(ctx, alice)
	if len(dls) != 0 {
		t.Errorf("expected no dead letter from a stale delivery, got %+v", dls)
	}
}

// TestExpiredReportsRunOutNotReleased: Expired tells of a lease that ran out, once, and not
// of one released; its channel closes with ctx.
func TestExpiredReportsRunOutNotReleased(t *testing.T) {
	t.Parallel()
	e, ctx := setup(t, mem.Config{})
	b := e.Connect()
	wctx, stop := context.WithCancel(ctx)
	ch, err := b.Leases.Expired(wctx)
	must(t, err, "expired")
	bob := tenant.ID{Project: "site", User: "bob"}
	released, err := b.Leases.Acquire(ctx, bob, "w1", 50*time.Millisecond)
	must(t, err, "acquire")
	must(t, b.Leases.Release(ctx, released), "release")
	_, err = b.Leases.Acquire(ctx, alice, "w1", 50*time.Millisecond)
	must(t, err, "acquire")
	select {
	case got := <-ch:
		if got != alice {
			t.Fatalf("expected %s to expire, got %s", alice, got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no expiry reported")
	}
	stop()
	for got := range ch { // closes once ctx ended; nothing else was due
		t.Errorf("unexpected expiry of %s", got)
	}
}

// TestTokensIncreaseUnderConcurrency: acquisitions racing over many tenants get distinct
// tokens, and each acquirer sees its own tokens increase.
func TestTokensIncreaseUnderConcurrency(t *testing.T) {
	t.Parallel()
	e, ctx := setup(t, mem.Config{})
	var mu sync.Mutex
	seen := map[uint64]bool{}
	var wg sync.WaitGroup
	for w := range 8 {
		b := e.Connect()
		wg.Go(func() {
			var last uint64
			for i := range 200 {
				tn := tenant.ID{Project: "site", User: fmt.Sprint("u", i%5)}
				l, err := b.Leases.Acquire(ctx, tn, fmt.Sprint("w", w), time.Minute)
				if errors.Is(err, broker.ErrLeaseHeld) {
					continue
				}
				if err != nil || l.Token <= last {
					t.Errorf("acquire: token %d after %d, %v", l.Token, last, err)
					return
				}
				last = l.Token
				mu.Lock()
				if seen[l.Token] {
					t.Errorf("token %d handed out twice", l.Token)
				}
				seen[l.Token] = true
				mu.Unlock()
				if err := b.Leases.Release(ctx, l); err != nil {
					t.Errorf("release: %v", err)
				}
			}
		})
	}
	wg.Wait()
}

// TestLimits: a job or result over MaxMessageSize is ErrTooLarge; after DedupWindow the same
// job id is queued again (as on NATS).
func TestLimits(t *testing.T) {
	t.Parallel()
	e, ctx := setup(t, mem.Config{MaxMessageSize: 1 << 10, DedupWindow: 100 * time.Millisecond})
	b := e.Connect()
	big := job(1)
	big.Bulk = []byte(`"` + strings.Repeat("x", 2<<10) + `"`)
	if err := b.Inbox.Publish(ctx, big); !errors.Is(err, broker.ErrTooLarge) {
		t.Errorf("publish of a big job: expected ErrTooLarge, got %v", err)
	}
	big.Bulk, _ = json.Marshal(make([]byte, 900)) // under the limit, but not once encoded
	if err := b.Inbox.Publish(ctx, big); !errors.Is(err, broker.ErrTooLarge) {
		t.Errorf("publish of a job too big once encoded: expected ErrTooLarge, got %v", err)
	}
	res := broker.Result{JobID: big.ID, Tenant: alice, OutputTail: strings.Repeat("x", 2<<10)}
	if err := b.Results.Publish(ctx, res); !errors.Is(err, broker.ErrTooLarge) {
		t.Errorf("publish of a big result: expected ErrTooLarge, got %v", err)
	}
	small := job(2)
	must(t, b.Inbox.Publish(ctx, small), "publish")
	must(t, b.Inbox.Publish(ctx, small), "publish again within the window")
	time.Sleep(150 * time.Millisecond) // waiting out the window is the point
	must(t, b.Inbox.Publish(ctx, small), "publish after the window")
	if n, _ := b.Inbox.Pending(ctx, alice); n != 2 {
		t.Errorf("expected 2 pending (once within the window, again after it), got %d", n)
	}
}

// TestValuesAreCopies: what a caller changes after a call never reaches the store.
func TestValuesAreCopies(t *testing.T) {
	t.Parallel()
	e, ctx := setup(t, mem.Config{})
	b := e.Connect()
	j := job(1)
	j.Bulk = []byte(`"original"`)
	must(t, b.Inbox.Publish(ctx, j), "publish")
	must(t, b.Jobs.Create(ctx, broker.JobRecord{Job: j, State: broker.StateQueued}), "create")
	j.Bulk[1] = 'X'
	q, err := b.Inbox.Open(ctx, alice, broker.QueueOptions{})
	must(t, err, "open")
	d, err := q.Next(ctx, time.Second)
	must(t, err, "next")
	rec, err := b.Jobs.Get(ctx, j.ID)
	must(t, err, "get")
	if got := string(d.Job().Bulk); got != `"original"` {
		t.Errorf("queued job changed with the caller's slice: %q", got)
	}
	if got := string(rec.Job.Bulk); got != `"original"` {
		t.Errorf("record changed with the caller's slice: %q", got)
	}
	tb, err := b.Table(ctx, "projects")
	must(t, err, "table")
	v := []byte("value")
	_, err = tb.Put(ctx, "site", v)
	must(t, err, "put")
	v[0] = 'X'
	if got, _, _ := tb.Get(ctx, "site"); string(got) != "value" {
		t.Errorf("table value changed with the caller's slice: %q", got)
	}
	if _, err := tb.Put(ctx, "no spaces", v); err == nil {
		t.Error("expected a key NATS would refuse to be refused")
	}
}

// TestNoGoroutinesAfterClose: with watches, expiry subscriptions, lease timers and blocked
// calls in flight, Close leaves no goroutine of this package behind.
func TestNoGoroutinesAfterClose(t *testing.T) {
	e := mem.NewEngine(mem.Config{})
	ctx := context.Background()
	b := e.Connect()
	_, err := b.Leases.Expired(ctx)
	must(t, err, "expired")
	_, _, err = b.Signals.Watch(ctx, alice)
	must(t, err, "watch")
	for i := range 10 {
		_, err := b.Leases.Acquire(ctx, tenant.ID{Project: "site", User: fmt.Sprint("u", i)}, "w", time.Duration(i+1)*time.Millisecond)
		must(t, err, "acquire")
	}
	done := make(chan struct{})
	go func() { defer close(done); _, _ = b.Claims.Next(ctx) }()
	time.Sleep(20 * time.Millisecond) // some timers fire, the claim wait blocks
	must(t, e.Close(), "close")
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a blocked Claims.Next did not return after Close")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := memGoroutines()
		if left == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines of package mem left after Close:\n%s", left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// memGoroutines returns the stacks of goroutines running code of package mem, other than
// this test's own.
func memGoroutines() string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "broker/mem.") && !strings.Contains(g, "mem_test.") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}
