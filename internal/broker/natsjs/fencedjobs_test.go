package natsjs

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// tenantsOfOneGroup returns two tenants whose job ids end in the same group.
func tenantsOfOneGroup() (tenant.ID, tenant.ID) {
	seen := map[string]tenant.ID{}
	for i := 0; ; i++ {
		tn := mustTenant("p", fmt.Sprintf("u%d", i))
		if other, ok := seen[broker.JobGroup(tn)]; ok {
			return other, tn
		}
		seen[broker.JobGroup(tn)] = tn
	}
}

func newJobIDOf(t *testing.T, tn tenant.ID) string {
	t.Helper()
	id, err := broker.JobIDFor(broker.NewJobID(), tn)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// heldRecord creates a queued record of tn's and acquires tn for "a" for ttl: the record's id
// and the lease.
func heldRecord(t *testing.T, ctx context.Context, b *broker.Backend, tn tenant.ID, ttl time.Duration) (string, broker.Lease) {
	t.Helper()
	id := newJobIDOf(t, tn)
	if err := b.Jobs.Create(ctx, broker.QueuedRecord(broker.Job{ID: id, Tenant: tn})); err != nil {
		t.Fatal(err)
	}
	l, err := b.Leases.Acquire(ctx, tn, "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	return id, l
}

func countAttempt(r *broker.JobRecord) error { r.Attempts++; return nil }

// TestTenantsOfOneGroupAreFencedApart: two tenants whose records share a group (and so the
// subject prefix a fenced write is conditioned on) each keep their own fence. While the other
// tenant's records are created and updated and it is acquired again and again, every fenced
// write of this tenant's holder is stored exactly once (a lost race reads again), and none is
// refused for the other's acquisitions.
func TestTenantsOfOneGroupAreFencedApart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := testBackend(t, ctx, testConn(t, testServer(t)), Config{InboxShards: 1})
	one, two := tenantsOfOneGroup()
	id, l := heldRecord(t, ctx, b, one, time.Minute)
	f := broker.NewFence(b, l)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var otherErr error
	var rounds atomic.Int64
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			other := newJobIDOf(t, two)
			err := b.Jobs.Create(ctx, broker.QueuedRecord(broker.Job{ID: other, Tenant: two}))
			if err == nil {
				_, err = b.Jobs.Update(ctx, other, countAttempt)
			}
			if err == nil {
				var l2 broker.Lease
				if l2, err = b.Leases.Acquire(ctx, two, "b", time.Minute); err == nil {
					err = b.Leases.Release(ctx, l2)
				}
			}
			if err != nil {
				otherErr = err
				return
			}
			rounds.Add(1)
		}
	})
	writes := 0
	for ; writes < 50 || rounds.Load() < 50; writes++ {
		if _, err := f.UpdateJob(ctx, id, countAttempt); err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("write %d of the holder of %s beside %s's: %v", writes, one, two, err)
		}
	}
	close(stop)
	wg.Wait()
	if otherErr != nil {
		t.Fatal(otherErr)
	}
	rec, err := b.Jobs.Get(ctx, id)
	if err != nil || rec.Attempts != writes || rec.LeaseToken != l.Token {
		t.Fatalf("record %+v, %v; want %d attempts under token %d", rec, err, writes, l.Token)
	}
}

// TestAHoldersNextWriteReadsNothing: after its fenced write of a record, the holder's next
// write of it (a job's final state after its running mark) is one publish and no read, when
// no one wrote in the group since.
func TestAHoldersNextWriteReadsNothing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc := testConn(t, testServer(t))
	b := testBackend(t, ctx, nc, Config{InboxShards: 1})
	tn := mustTenant("p", "u")
	id, l := heldRecord(t, ctx, b, tn, time.Minute)
	f := broker.NewFence(b, l)
	before := nc.Stats().OutMsgs
	if _, err := f.UpdateJob(ctx, id, countAttempt); err != nil {
		t.Fatal(err)
	}
	first := nc.Stats().OutMsgs - before
	before = nc.Stats().OutMsgs
	if _, err := f.UpdateJob(ctx, id, countAttempt); err != nil {
		t.Fatal(err)
	}
	if sent := nc.Stats().OutMsgs - before; sent != 1 {
		t.Errorf("the second write sent %d messages (the first %d); want 1, the publish", sent, first)
	}
}

// TestALostFenceKeyIsRaisedByARecordWrite: with the tenant's fence key gone from the records'
// stream (aged out, or lost with a crash of the server before its asynchronous write), the
// holder's record write raises it again and is stored, and a newer acquisition still refuses
// the older holder's next write.
func TestALostFenceKeyIsRaisedByARecordWrite(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := testBackend(t, ctx, testConn(t, testServer(t)), Config{InboxShards: 1})
	tn := mustTenant("p", "u")
	id, a := heldRecord(t, ctx, b, tn, time.Second)
	j := b.Jobs.(*jobs)
	if err := j.s.Purge(ctx, jetstream.WithPurgeSubject(jobsFenceSubject(tn))); err != nil {
		t.Fatal(err)
	}
	fa := broker.NewFence(b, a)
	if _, err := fa.UpdateJob(ctx, id, countAttempt); err != nil {
		t.Fatalf("the holder's write after its fence key was lost: %v", err)
	}
	if f, err := j.a.settles.read(ctx, tn); err != nil || f.token != a.Token {
		t.Fatalf("fence key after the write: %+v, %v; want token %d", f, err, a.Token)
	}
	acquireOnceExpired(t, ctx, b, tn)
	if _, err := fa.UpdateJob(ctx, id, countAttempt); !errors.Is(err, broker.ErrLeaseLost) {
		t.Fatalf("the older holder's write after a newer acquisition: %v; want ErrLeaseLost", err)
	}
	if rec, err := b.Jobs.Get(ctx, id); err != nil || rec.Attempts != 1 {
		t.Fatalf("record %+v, %v; want the one write stored", rec, err)
	}
}

// TestAnAckAfterItsResultWritesNoMark: a holder's Ack of a job whose result it has just
// published under its lease sends nothing (that publish was the job's fence); an Ack without
// one writes the settle mark. Either way the job is not delivered again.
func TestAnAckAfterItsResultWritesNoMark(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc := testConn(t, testServer(t))
	b := testBackend(t, ctx, nc, Config{InboxShards: 1})
	tn := mustTenant("p", "u")
	ids := []string{newJobIDOf(t, tn), newJobIDOf(t, tn)}
	for _, id := range ids {
		if err := b.Inbox.Publish(ctx, broker.Job{ID: id, Tenant: tn}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := b.Leases.Acquire(ctx, tn, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	f := broker.NewFence(b, l)
	q, err := b.Inbox.Open(ctx, tn, broker.QueueOptions{AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close(ctx)
	for i, withResult := range []bool{true, false} {
		d, err := q.Next(ctx, 5*time.Second)
		if err != nil || d.Job().ID != ids[i] {
			t.Fatalf("next: %v, %v; want job %s", d, err, ids[i])
		}
		d = f.Delivery(d)
		if withResult {
			if err := f.PublishResult(ctx, broker.Result{JobID: d.Job().ID, Tenant: tn, State: broker.StateDone}); err != nil {
				t.Fatal(err)
			}
		}
		before := nc.Stats().OutMsgs
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		want := uint64(1) // the settle mark
		if withResult {
			want = 0
		}
		if sent := nc.Stats().OutMsgs - before; sent != want {
			t.Errorf("ack %d (a result published first: %v) sent %d messages; want %d", i, withResult, sent, want)
		}
	}
	if d, err := q.Next(ctx, 200*time.Millisecond); !errors.Is(err, broker.ErrNoMessage) {
		t.Fatalf("after both acks: %v, %v; want no message", d, err)
	}
}

// TestAResultSaysItsRecordIsFinal: a result its holder publishes right after making the job's
// record final under the same lease reaches a router in the engine's process as recorded (it
// need not read the record back); one published after a record write that is not final is
// not, nor is one that reaches the router from a restarted engine, which may have lost the
// record's write (records persist asynchronously), nor one read from an engine elsewhere.
func TestAResultSaysItsRecordIsFinal(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	var srv *server.Server
	start := func() *broker.Backend {
		var err error
		if srv, err = StartServer(ServerConfig{Dir: dir, NoSync: true, User: "u", Password: "p"}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
		return testBackend(t, ctx, testConn(t, srv), Config{InboxShards: 1, EngineID: srv.ID()})
	}
	b := start()
	tn := mustTenant("p", "u")
	finish := func(b *broker.Backend, f *broker.Fence, final bool) string {
		id := newJobIDOf(t, tn)
		if err := b.Jobs.Create(ctx, broker.QueuedRecord(broker.Job{ID: id, Tenant: tn})); err != nil {
			t.Fatal(err)
		}
		res := broker.Result{JobID: id, Tenant: tn, State: broker.StateDone}
		if _, err := f.UpdateJob(ctx, id, func(r *broker.JobRecord) error {
			r.State = broker.StateRunning
			if final {
				r.State, r.Result = broker.StateDone, &res
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := f.PublishResult(ctx, res); err != nil {
			t.Fatal(err)
		}
		return id
	}
	hold := func(b *broker.Backend) (*broker.Fence, broker.Lease) {
		l, err := b.Leases.Acquire(ctx, tn, "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return broker.NewFence(b, l), l
	}
	f, l := hold(b)
	restarted := finish(b, f, true)
	if err := b.Leases.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	b = start()
	d, err := b.Results.Next(ctx)
	if err != nil || d.Result().JobID != restarted {
		t.Fatalf("after the restart: %v, %v; want the result of %s", d, err, restarted)
	}
	if d.(broker.RecordedResult).Recorded() {
		t.Errorf("a result read from a restarted server says its record is final")
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	f, _ = hold(b)
	want := map[string]bool{finish(b, f, true): true, finish(b, f, false): false}
	for range want {
		d, err := b.Results.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.(broker.RecordedResult).Recorded(); got != want[d.Result().JobID] {
			t.Errorf("result of %s recorded: %v; want %v", d.Result().JobID, got, want[d.Result().JobID])
		}
		if want[d.Result().JobID] { // through a connection to an engine in another process
			elsewhere := *d.(*resultDelivery)
			elsewhere.a = &adapter{nc: elsewhere.a.nc, cfg: Config{Replicas: 1}}
			if elsewhere.Recorded() {
				t.Errorf("a result read from an engine outside this process says its record is final")
			}
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestServesEngineTrustsTheRecordsItStored: the embedded engine as serve opens it (its URL,
// no configuration) makes a holder's result, published after its final record, reach the
// router as recorded, so serve's router does not read the record back.
func TestServesEngineTrustsTheRecordsItStored(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := openEmbedded(ctx, EmbeddedURL(filepath.Join(t.TempDir(), "nats")), broker.Options{User: "u", Password: "p", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	tn := mustTenant("p", "u")
	id, l := heldRecord(t, ctx, b, tn, time.Minute)
	f := broker.NewFence(b, l)
	res := broker.Result{JobID: id, Tenant: tn, State: broker.StateDone}
	if _, err := f.UpdateJob(ctx, id, func(r *broker.JobRecord) error { r.State, r.Result = broker.StateDone, &res; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := f.PublishResult(ctx, res); err != nil {
		t.Fatal(err)
	}
	d, err := b.Results.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rd, ok := d.(broker.RecordedResult); !ok || !rd.Recorded() {
		t.Fatalf("the result of %s through serve's engine is not recorded (capability %v)", id, ok)
	}
}
