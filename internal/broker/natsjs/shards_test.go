package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// TestShardsAreTheDeploymentsNotTheProcesses: the first process decides the inbox's shards and
// records them on WO_IN; a process configured otherwise uses the recorded number, so every job
// one process accepts, another finds, in whichever shard its tenant hashes to.
func TestShardsAreTheDeploymentsNotTheProcesses(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testServer(t)
	open := func(shards int) *broker.Backend {
		return testBackend(t, ctx, testConn(t, srv), Config{InboxShards: shards})
	}
	first, second := open(3), open(5)
	if got := streamsOf(t, ctx, srv); fmt.Sprint(got) != "[WO_IN WO_IN_1 WO_IN_2]" {
		t.Fatalf("inbox streams %v; want the first process's 3", got)
	}
	const tenants = 30
	for i := range tenants {
		job := testJob(fmt.Sprint("j", i), mustTenant("p", fmt.Sprint("u", i)))
		if err := first.Inbox.Publish(ctx, job); err != nil {
			t.Fatal(err)
		}
	}
	pending, err := second.Inbox.Tenants(ctx)
	if err != nil || len(pending) != tenants {
		t.Fatalf("the second process sees %d tenants with jobs (%v); want %d", len(pending), err, tenants)
	}
	used := map[string]bool{}
	for i := range tenants {
		tid := mustTenant("p", fmt.Sprint("u", i))
		if n, err := second.Inbox.Pending(ctx, tid); err != nil || n != 1 {
			t.Fatalf("%s pending %d, %v", tid, n, err)
		}
		q, err := second.Inbox.Open(ctx, tid, broker.QueueOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d, err := q.Next(ctx, time.Second)
		if err != nil || d.Job().ID != fmt.Sprint("j", i) {
			t.Fatalf("%s: next %v", tid, err)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		_ = q.Close(ctx)
		used[first.Inbox.(*inbox).a.shardOf(tid).name] = true
	}
	if len(used) != 3 {
		t.Errorf("30 tenants landed in %d of 3 shards", len(used))
	}
}

// TestADeploymentBeforeShardsKeepsOneStream: a WO_IN made before shards (no record of them)
// stays the whole inbox, so jobs queued before an upgrade are still found.
func TestADeploymentBeforeShardsKeepsOneStream(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testServer(t)
	nc := testConn(t, srv)
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: streamInbox, Subjects: []string{subjInbox + "*.*"},
		Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	old := mustTenant("p", "queued-before-the-upgrade")
	queued := `{"id":"old","tenant":{"project":"p","user":"queued-before-the-upgrade"},"instruction":"x"}`
	if _, err := js.Publish(ctx, subjInbox+old.Subject(), []byte(queued)); err != nil {
		t.Fatal(err)
	}
	b := testBackend(t, ctx, nc, Config{InboxShards: 4})
	if got := streamsOf(t, ctx, srv); fmt.Sprint(got) != "[WO_IN]" {
		t.Fatalf("inbox streams %v; want WO_IN alone", got)
	}
	if n, err := b.Inbox.Pending(ctx, old); err != nil || n != 1 {
		t.Fatalf("the job queued before the upgrade: pending %d, %v", n, err)
	}
	q, err := b.Inbox.Open(ctx, old, broker.QueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = q.Close(ctx) }()
	d, err := q.Next(ctx, 10*time.Second)
	if err != nil || d.Job().ID != "old" || string(d.Job().Payload) != `{"instruction":"x"}` {
		t.Fatalf("the job queued before the payload was opaque: %+v, %v; want its fields as its payload", d, err)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, streamInbox)
	if err != nil || s.CachedInfo().Config.Metadata[metaShards] != "1" {
		t.Fatalf("WO_IN records %v (%v); want 1 shard", s.CachedInfo().Config.Metadata, err)
	}
}

// testServer starts an embedded server (user u, password p) for the test.
func testServer(t *testing.T) *server.Server {
	t.Helper()
	srv, err := StartServer(ServerConfig{Dir: t.TempDir(), NoSync: true, User: "u", Password: "p"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv
}

// testConn connects to srv in-process until the test ends.
func testConn(t *testing.T, srv *server.Server) *nats.Conn {
	t.Helper()
	nc, err := ConnectInProcess(srv, "u", "p")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// testBackend opens a backend on nc with cfg.
func testBackend(t *testing.T, ctx context.Context, nc *nats.Conn, cfg Config) *broker.Backend {
	t.Helper()
	b, err := New(ctx, nc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// testJob is job id of tn, accepted now.
func testJob(id string, tn tenant.ID) broker.Job {
	return broker.Job{ID: id, Tenant: tn, Payload: []byte(`"x"`), AcceptedAt: time.Now()}
}

func mustTenant(p, u string) tenant.ID {
	t, err := tenant.New(p, u)
	if err != nil {
		panic(err)
	}
	return t
}

// streamsOf lists the inbox's streams on srv.
func streamsOf(t *testing.T, ctx context.Context, srv *server.Server) []string {
	t.Helper()
	js, _ := jetstream.New(testConn(t, srv))
	var out []string
	for k := range 8 {
		name := shardNamed(k).name
		_, err := js.Stream(ctx, name)
		switch {
		case err == nil:
			out = append(out, name)
		case !errors.Is(err, jetstream.ErrStreamNotFound):
			t.Fatal(err)
		}
	}
	return out
}

// TestALostShardRecordIsRebuiltFromTheShards: WO_IN rewritten without the record (an older
// binary's setup, an edit by hand) must not make a process read one shard while the jobs sit
// in four: the shard streams that exist say how many there are.
func TestALostShardRecordIsRebuiltFromTheShards(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testServer(t)
	nc := testConn(t, srv)
	first := testBackend(t, ctx, nc, Config{InboxShards: 4})
	var tid tenant.ID
	for i := 0; ; i++ { // a tenant outside WO_IN
		tid = mustTenant("p", fmt.Sprint("u", i))
		if first.Inbox.(*inbox).a.shardOf(tid).name != streamInbox {
			break
		}
	}
	if err := first.Inbox.Publish(ctx, testJob("j", tid)); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	if _, err := js.UpdateStream(ctx, jetstream.StreamConfig{Name: streamInbox, Subjects: []string{subjInbox + "*.*"},
		Retention: jetstream.WorkQueuePolicy, Duplicates: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	second := testBackend(t, ctx, nc, Config{InboxShards: 1})
	if n, err := second.Inbox.Pending(ctx, tid); err != nil || n != 1 {
		t.Fatalf("after the record was lost, the job of %s: pending %d, %v; want 1", tid, n, err)
	}
	if all, err := second.Inbox.Tenants(ctx); err != nil || all[tid] != 1 {
		t.Fatalf("Tenants %v, %v", all, err)
	}
}

// TestTenantsOfTheShardsThatAnswer: while one shard of the inbox does not answer (it is gone
// here; on a cluster, it elects a leader), Tenants returns the tenants of the others with
// broker.ErrPartial, so the reconciler serves them rather than none.
func TestTenantsOfTheShardsThatAnswer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testServer(t)
	b := testBackend(t, ctx, testConn(t, srv), Config{InboxShards: 3})
	const tenants = 30
	lost := shardNamed(1).name
	want := 0
	for i := range tenants {
		tid := mustTenant("p", fmt.Sprint("u", i))
		job := testJob(fmt.Sprint("j", i), tid)
		if err := b.Inbox.Publish(ctx, job); err != nil {
			t.Fatal(err)
		}
		if b.Inbox.(*inbox).a.shardOf(tid).name != lost {
			want++
		}
	}
	js, _ := jetstream.New(testConn(t, srv))
	if err := js.DeleteStream(ctx, lost); err != nil {
		t.Fatal(err)
	}
	pending, err := b.Inbox.Tenants(ctx)
	if !errors.Is(err, broker.ErrPartial) || !strings.Contains(err.Error(), lost) {
		t.Fatalf("Tenants with %s gone: %v; want broker.ErrPartial naming it", lost, err)
	}
	if len(pending) != want || want == 0 || want == tenants {
		t.Fatalf("%d tenants from the shards that answer; want %d of %d", len(pending), want, tenants)
	}
}
