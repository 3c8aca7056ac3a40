package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// TestAnExpiredLeaseTheEngineKeptIsTaken: an engine that crashed around a lease's expiry was
// seen to bring the expired record back and never expire it again (its TTL marker lost): a
// record past its own expiresAt that the engine keeps for good. It is free: the next Acquire
// takes it, with a later token, and the lease it makes is exclusive and expires as usual.
func TestAnExpiredLeaseTheEngineKeptIsTaken(t *testing.T) {
	t.Parallel()
	ctx, b, nc := aServer(t, Config{})
	tn, _ := tenant.New("cafe", "owner")
	old := keepExpiredLease(t, ctx, b, nc, tn)

	if _, err := b.Leases.Get(ctx, tn); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("get the expired record: %v, want ErrNotFound", err)
	}
	l, err := b.Leases.Acquire(ctx, tn, "worker-new", 2*time.Second)
	if err != nil {
		t.Fatalf("acquire over the expired record: %v", err)
	}
	if l.Token <= old.Token {
		t.Errorf("token %d after the expired record's %d: fencing tokens must increase", l.Token, old.Token)
	}
	if _, err := b.Leases.Acquire(ctx, tn, "worker-other", 2*time.Second); !errors.Is(err, broker.ErrLeaseHeld) {
		t.Fatalf("acquire a live lease: %v, want ErrLeaseHeld", err)
	}
	if _, err := b.Leases.Renew(ctx, l); err != nil {
		t.Fatalf("renew the lease taken over: %v", err)
	}
	if got, err := b.Leases.Get(ctx, tn); err != nil || got.Owner != "worker-new" {
		t.Fatalf("get the lease taken over: %+v, %v", got, err)
	}
}

// keepExpiredLease leaves tn's lease record as the repro's engine kept it: a worker of an
// earlier run acquired it with a 15 s TTL, and the record came back after its expiry with
// no TTL the engine acts on. It returns the lease that record stands for.
func keepExpiredLease(t *testing.T, ctx context.Context, b *broker.Backend, nc *nats.Conn, tn tenant.ID) broker.Lease {
	t.Helper()
	old, err := b.Leases.Acquire(ctx, tn, "worker-of-an-earlier-run", 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, b.Leases.(*leases).of(tn).bucket)
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Minute)
	v := leaseValue{Owner: old.Owner, ClaimedAt: past.Add(-15 * time.Second), ExpiresAt: past, TTL: old.TTL}
	data, _ := json.Marshal(v)
	rev, err := kv.Put(ctx, tn.Subject(), data)
	if err != nil {
		t.Fatal(err)
	}
	old.Token, old.Version = rev, rev // the record's token is its revision
	return old
}

// TestAnAcquisitionAsksNoJetStreamAPI: taking a lease (its create and the fence keys it
// raises, each read and written) goes through the streams alone, never through the server's
// JetStream API workers (two per core, shared by every client): the fence key in the result
// shard is read with a direct get on one replica, as the records' one is. A tenant acquired
// for the first time (no fence key yet) and again after a release.
func TestAnAcquisitionAsksNoJetStreamAPI(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testServer(t)
	nc := testConn(t, srv)
	b := testBackend(t, ctx, testConn(t, srv), Config{InboxShards: 2})
	asked := apiRequests(t, nc, func(m *nats.Msg) bool { return !strings.HasPrefix(m.Subject, "$JS.API.DIRECT.GET.") })
	for _, u := range []string{"a", "b", "c"} {
		tn := mustTenant("p", u)
		for range 2 {
			l, err := b.Leases.Acquire(ctx, tn, "w", 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Leases.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := asked(); len(got) > 0 {
		t.Fatalf("6 acquisitions asked the JetStream API %d times: %v", len(got), got)
	}
}

// apiRequests records the JetStream API requests on nc's server that keep accepts, from now
// on; the function it returns takes (and forgets) those made so far. The requests arrive on a
// channel, which the connection's reader fills in order, so once a flush of nc returns every
// request made before it is there (a callback may not have run yet: a test read too few).
func apiRequests(t *testing.T, nc *nats.Conn, keep func(*nats.Msg) bool) func() []string {
	t.Helper()
	ch := make(chan *nats.Msg, 1<<16)
	sub, err := nc.ChanSubscribe("$JS.API.>", ch)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() []string {
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		var asked []string
		for {
			select {
			case m := <-ch:
				if keep(m) {
					asked = append(asked, m.Subject+" "+string(m.Data))
				}
			default:
				return asked
			}
		}
	}
}

// TestAnAcquisitionReadsAFenceKeyWithoutDirectGets: an older binary's setup turns direct gets
// off on the result shards (it does not ask for them); a process that saw them on still
// acquires, reading the fence key from the stream's leader.
func TestAnAcquisitionReadsAFenceKeyWithoutDirectGets(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, b, other := twoHolders(t, ctx, 1)
	tn := mustTenant("p", "u")
	l, err := b.Leases.Acquire(ctx, tn, "w", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Leases.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	s, err := js.Stream(ctx, streamResults)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.AllowDirect = false
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Leases.Acquire(ctx, tn, "w", 5*time.Second); err != nil {
		t.Fatalf("acquire once direct gets are off: %v", err)
	}
}

// TestANewTenureRaisesItsFenceKeysWithoutReads: a process acquiring a tenant it held before
// raises the tenant's fence keys from where its last tenure left them, reading neither.
func TestANewTenureRaisesItsFenceKeysWithoutReads(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testServer(t)
	nc := testConn(t, srv)
	b := testBackend(t, ctx, testConn(t, srv), Config{InboxShards: 2})
	tenure := fenceKeyReads(t, ctx, nc, mustTenant("p", "u"))
	first := tenure(b)
	if got := tenure(b); len(got) != 0 {
		t.Fatalf("the second tenure read the fence keys %d times (the first %d): %v; want none", len(got), len(first), got)
	}
}

// twoHolders is a server, a connection to it that opens no backend (for watching it), and
// two backends on connections of their own, as two processes' (neither remembers the other's
// fence keys), whose inbox has shards.
func twoHolders(t *testing.T, ctx context.Context, shards int) (*nats.Conn, *broker.Backend, *broker.Backend) {
	t.Helper()
	srv := testServer(t)
	nc := testConn(t, srv)
	b := testBackend(t, ctx, testConn(t, srv), Config{InboxShards: shards})
	return nc, b, testBackend(t, ctx, testConn(t, srv), Config{InboxShards: shards})
}

// fenceKeyReads returns a tenure of tn (acquired and released) through a backend, which
// returns the reads of fence keys made on nc's server since the last.
func fenceKeyReads(t *testing.T, ctx context.Context, nc *nats.Conn, tn tenant.ID) func(*broker.Backend) []string {
	t.Helper()
	reads := apiRequests(t, nc, func(m *nats.Msg) bool {
		asked := m.Subject + string(m.Data)
		return strings.Contains(asked, "_fence.") || strings.Contains(asked, ".f.")
	})
	return func(b *broker.Backend) []string {
		l, err := b.Leases.Acquire(ctx, tn, "w", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Leases.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		return reads()
	}
}

// TestATenantsFirstAcquisitionReadsNoFenceKey: the first acquisition of a tenant (its lease
// key never written) writes its fence keys on the condition that they have never been written
// either, reading neither; a process acquiring a tenant someone else released reads them.
func TestATenantsFirstAcquisitionReadsNoFenceKey(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, b, other := twoHolders(t, ctx, 2)
	tenure := fenceKeyReads(t, ctx, nc, mustTenant("p", "u"))
	if got := tenure(b); len(got) != 0 {
		t.Fatalf("the tenant's first acquisition read its fence keys %d times: %v; want none", len(got), got)
	}
	if got := tenure(other); len(got) != 2 {
		t.Fatalf("an acquisition after another process's release read the fence keys %d times: %v; want 2", len(got), got)
	}
}

// TestAFirstAcquisitionOverAnOldFenceRaisesIt: a lease key the engine lost altogether (no
// marker left) makes the next acquisition look like the tenant's first; the fence keys it
// finds written are read and raised all the same, so the older holder's writes are refused.
func TestAFirstAcquisitionOverAnOldFenceRaisesIt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, b, other := twoHolders(t, ctx, 1)
	tn := mustTenant("p", "u")
	old, err := b.Leases.Acquire(ctx, tn, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	s, err := js.Stream(ctx, "KV_"+bucketLeases)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject("$KV."+bucketLeases+"."+tn.Subject())); err != nil {
		t.Fatal(err)
	}
	l, err := other.Leases.Acquire(ctx, tn, "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	res := broker.Result{JobID: newJobIDOf(t, tn), Tenant: tn, State: broker.StateDone}
	if err := broker.NewFence(b, old).PublishResult(ctx, res); !errors.Is(err, broker.ErrLeaseLost) {
		t.Fatalf("the older holder's result: %v; want ErrLeaseLost", err)
	}
	if err := broker.NewFence(other, l).PublishResult(ctx, res); err != nil {
		t.Fatalf("the newer holder's result: %v", err)
	}
}
