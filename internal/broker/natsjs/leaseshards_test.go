package natsjs

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// TestLeasesAreSplitLikeTheInbox: a new deployment splits its leases over as many buckets as
// its inbox shards and records the number on WO_IN; a process configured otherwise uses the
// recorded number, so both see one lease per tenant; a lease's expiry in any bucket is
// reported; a tenant's tokens still increase.
func TestLeasesAreSplitLikeTheInbox(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testServer(t)
	first := testBackend(t, ctx, testConn(t, srv), Config{InboxShards: 3})
	second := testBackend(t, ctx, testConn(t, srv), Config{InboxShards: 1})
	if got := bucketsOf(t, ctx, srv); fmt.Sprint(got) != "[wo_leases wo_leases_1 wo_leases_2]" {
		t.Fatalf("lease buckets %v; want 3", got)
	}
	js, _ := jetstream.New(testConn(t, srv))
	if s, err := js.Stream(ctx, streamInbox); err != nil || s.CachedInfo().Config.Metadata[metaLeaseShards] != "3" {
		t.Fatalf("WO_IN records %v (%v); want 3 lease shards", s.CachedInfo().Config.Metadata, err)
	}
	tn := tenantOutsideFirstLeaseShard(first)
	expired, err := second.Leases.Expired(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l, err := first.Leases.Acquire(ctx, tn, "w1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := second.Leases.Acquire(ctx, tn, "w2", time.Second); !errors.Is(err, broker.ErrLeaseHeld) {
		t.Fatalf("a second owner through the other process: %v; want ErrLeaseHeld", err)
	}
	if all, err := second.Leases.List(ctx); err != nil || len(all) != 1 || all[0].Tenant != tn {
		t.Fatalf("List %+v, %v; want %s's lease", all, err, tn)
	}
	select {
	case got := <-expired:
		if got != tn {
			t.Fatalf("expired %s; want %s", got, tn)
		}
	case <-ctx.Done():
		t.Fatalf("no expiry reported for %s's lease in %s", tn, first.Leases.(*leases).of(tn).bucket)
	}
	next, err := second.Leases.Acquire(ctx, tn, "w2", time.Second)
	if err != nil || next.Token <= l.Token {
		t.Fatalf("the next lease: %+v, %v; want a token above %d", next, err, l.Token)
	}
}

// TestADeploymentBeforeLeaseShardsKeepsOneBucket: a WO_IN that records inbox shards but no
// lease shards (made by a binary from before them) keeps every lease in wo_leases, where its
// processes look, whatever this process is configured for.
func TestADeploymentBeforeLeaseShardsKeepsOneBucket(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testServer(t)
	js, _ := jetstream.New(testConn(t, srv))
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: streamInbox, Subjects: []string{subjInbox + "*.*"},
		Retention: jetstream.WorkQueuePolicy, Metadata: map[string]string{metaShards: "4"}}); err != nil {
		t.Fatal(err)
	}
	old, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucketLeases, History: 1, LimitMarkerTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b := testBackend(t, ctx, testConn(t, srv), Config{InboxShards: 4})
	if got := bucketsOf(t, ctx, srv); fmt.Sprint(got) != "[wo_leases]" {
		t.Fatalf("lease buckets %v; want wo_leases alone", got)
	}
	tn := mustTenant("p", "held-by-an-older-binary")
	if _, err := b.Leases.Acquire(ctx, tn, "new", 15*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Get(ctx, tn.Subject()); err != nil {
		t.Fatalf("the lease is not in wo_leases, where an older binary looks: %v", err)
	}
}

// TestALostLeaseShardRecordIsRebuiltFromTheBuckets: WO_IN updated without the lease record
// (by an older binary, or by hand): a process that starts then counts the lease buckets that
// exist and finds the leases where the others put them.
func TestALostLeaseShardRecordIsRebuiltFromTheBuckets(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testServer(t)
	first := testBackend(t, ctx, testConn(t, srv), Config{InboxShards: 4})
	tn := tenantOutsideFirstLeaseShard(first)
	if _, err := first.Leases.Acquire(ctx, tn, "w1", 15*time.Second); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(testConn(t, srv))
	if _, err := js.UpdateStream(ctx, jetstream.StreamConfig{Name: streamInbox, Subjects: []string{subjInbox + "*.*"},
		Retention: jetstream.WorkQueuePolicy, Duplicates: 2 * time.Minute, AllowDirect: true,
		Metadata: map[string]string{metaShards: "4"}}); err != nil {
		t.Fatal(err)
	}
	second := testBackend(t, ctx, testConn(t, srv), Config{InboxShards: 1})
	if _, err := second.Leases.Acquire(ctx, tn, "w2", 15*time.Second); !errors.Is(err, broker.ErrLeaseHeld) {
		t.Fatalf("after the record was lost, a second owner of %s: %v; want ErrLeaseHeld", tn, err)
	}
}

// tenantOutsideFirstLeaseShard is a tenant whose lease is not in wo_leases.
func tenantOutsideFirstLeaseShard(b *broker.Backend) tenant.ID {
	for i := 0; ; i++ {
		tn := mustTenant("p", fmt.Sprint("u", i))
		if b.Leases.(*leases).of(tn).bucket != bucketLeases {
			return tn
		}
	}
}

// bucketsOf lists the lease buckets on srv.
func bucketsOf(t *testing.T, ctx context.Context, srv *server.Server) []string {
	t.Helper()
	js, _ := jetstream.New(testConn(t, srv))
	var out []string
	for k := range 8 {
		name := leaseBucketNamed(k)
		_, err := js.KeyValue(ctx, name)
		switch {
		case err == nil:
			out = append(out, name)
		case !errors.Is(err, jetstream.ErrBucketNotFound):
			t.Fatal(err)
		}
	}
	return out
}
