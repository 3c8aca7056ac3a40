package natsjs

import (
	"context"
	"encoding/json"
	"errors"
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
