package natsjs

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// TestClaimsWatchStartsOverWhenItStops: a process's claims watch that stops without a word
// (seen on a cluster that lost a node under load: every worker kept its idle tenant, blind
// to the tenants waiting) is replaced by the watchdog, and the process sees the waiting
// claim a few seconds later.
func TestClaimsWatchStartsOverWhenItStops(t *testing.T) {
	t.Parallel()
	ctx, worker, router := twoProcesses(t)
	if n, err := worker.Claims.Waiting(ctx); err != nil || n != 0 {
		t.Fatalf("waiting before any request: %d, %v", n, err)
	}
	w := worker.Claims.(*claims).store.watch.Load()
	w.mu.Lock()
	cc := w.cc
	w.mu.Unlock()
	cc.Stop() // the watch dies; nothing tells the index
	<-cc.Closed()

	tn, _ := tenant.New("site", "alice")
	if err := router.Claims.Request(ctx, tn, time.Now()); err != nil {
		t.Fatal(err)
	}
	took := waitWaiting(t, ctx, worker, 1, 3*watchCheck+5*time.Second)
	t.Logf("the waiting claim was seen %s after the request", took.Round(time.Millisecond))
	if cl, err := worker.Claims.Next(ctx); err != nil || cl.Tenant() != tn {
		t.Fatalf("next claim after the watch started over: %v, %v", cl, err)
	}
}

// TestRepeatedRequestRewritesTheRecord: a process whose watch missed a tenant's request
// learns of it from the router's next repeat, which writes a new version even though nothing
// about the request changed.
func TestRepeatedRequestRewritesTheRecord(t *testing.T) {
	t.Parallel()
	ctx, worker, router := twoProcesses(t)
	tn, _ := tenant.New("site", "alice")
	missed := make(chan struct{})
	var once sync.Once
	worker.Claims.(*claims).store.skip = func(e broker.ClaimEntry) bool {
		drop := false
		if e.Tenant == tn && e.Value != nil {
			once.Do(func() { drop = true; close(missed) })
		}
		return drop
	}
	waitWaiting(t, ctx, worker, 0, 5*time.Second) // the watch runs
	if err := router.Claims.Request(ctx, tn, time.Now()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-missed:
	case <-ctx.Done():
		t.Fatal("the worker's watch never saw the request")
	}
	if n, _ := worker.Claims.Waiting(ctx); n != 0 {
		t.Fatalf("after missing the request, %d waiting", n)
	}
	time.Sleep(broker.DefaultClaimRestate + 100*time.Millisecond)
	if err := router.Claims.Request(ctx, tn, time.Now()); err != nil { // the reconciler's repeat
		t.Fatal(err)
	}
	waitWaiting(t, ctx, worker, 1, time.Second) // well inside a watchdog period
}

// waitWaiting waits until b's index shows n waiting claims and returns how long it took.
func waitWaiting(t *testing.T, ctx context.Context, b *broker.Backend, n int, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		got, err := b.Claims.Waiting(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got == n {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("%d claims waiting after %s; want %d", got, within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// twoProcesses starts an engine with two clients: a worker's and a router's.
func twoProcesses(t *testing.T) (context.Context, *broker.Backend, *broker.Backend) {
	t.Helper()
	srv := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	open := func() *broker.Backend {
		b := testBackend(t, ctx, testConn(t, srv), Config{})
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	return ctx, open(), open()
}

// TestRequestAfterAckCostsAReadAndAWrite: asking again for a tenant whose last request was
// acknowledged (its key holds a delete marker) costs a process without an index, a router, a
// read and a write, as a first request does: the marker's revision comes with the read, not
// from a create that fails and reads again.
func TestRequestAfterAckCostsAReadAndAWrite(t *testing.T) {
	t.Parallel()
	srv := testServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	worker := testBackend(t, ctx, testConn(t, srv), Config{})
	nc := testConn(t, srv)
	router := testBackend(t, ctx, nc, Config{})
	tn, _ := tenant.New("site", "alice")
	for round := range 2 {
		before := nc.Stats().OutMsgs
		if err := router.Claims.Request(ctx, tn, time.Now()); err != nil {
			t.Fatal(err)
		}
		if sent := nc.Stats().OutMsgs - before; sent != 2 {
			t.Errorf("round %d: the request sent %d messages; want 2 (a read and a write)", round, sent)
		}
		cl, err := worker.Claims.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAckLeavesARecordEarlierReleasesRead: an acknowledged request leaves its key a record
// that KeyValue.Get returns with its revision. A process of an earlier release reads a key that
// way and writes over the revision it read: a delete marker, which Get reports as never
// written, would have its every request fail on the key's last revision, and retry forever.
func TestAckLeavesARecordEarlierReleasesRead(t *testing.T) {
	t.Parallel()
	ctx, worker, router := twoProcesses(t)
	tn, _ := tenant.New("site", "alice")
	if err := router.Claims.Request(ctx, tn, time.Now()); err != nil {
		t.Fatal(err)
	}
	cl, err := worker.Claims.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	e, err := worker.Claims.(*claims).store.kv.Get(ctx, tn.Subject())
	if err != nil {
		t.Fatalf("reading the acknowledged key as an earlier release does: %v", err)
	}
	if _, err := worker.Claims.(*claims).store.kv.Update(ctx, tn.Subject(), []byte(`{"since":"2026-01-01T00:00:00Z"}`), e.Revision()); err != nil {
		t.Fatalf("writing over it as an earlier release does: %v", err)
	}
}
