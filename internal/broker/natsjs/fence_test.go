package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// TestResultsMadeBeforeFenceKeysAreUpgraded: a deployment whose results stream and router
// consumer an older binary made (no fence subjects, no filter) opens: the stream takes the
// fence keys, the consumer is filtered to the results, the result waiting from before is
// read, and a fence key an acquisition raises is never handed to the router.
func TestResultsMadeBeforeFenceKeysAreUpgraded(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testServer(t)
	nc := testConn(t, srv)
	js, _ := jetstream.New(nc)
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: streamResults, Subjects: []string{subjResults + "*.*"}, MaxAge: 7 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: consumerResults, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	tn := mustTenant("p", "u")
	old, _ := json.Marshal(broker.Result{JobID: "old", Tenant: tn, State: broker.StateDone})
	if _, err := js.Publish(ctx, subjResults+tn.Subject(), old); err != nil {
		t.Fatal(err)
	}
	b := testBackend(t, ctx, nc, Config{InboxShards: 1})
	l, err := b.Leases.Acquire(ctx, tn, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	fresh := broker.Result{JobID: "fresh", Tenant: tn, State: broker.StateDone, LeaseToken: l.Token}
	if err := broker.NewFence(b, l).PublishResult(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"old", "fresh"} {
		d, err := b.Results.Next(ctx)
		if err != nil || d.Result().JobID != want {
			t.Fatalf("next result: %+v, %v; want %s (never a fence key)", d, err, want)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	nctx, ncancel := context.WithTimeout(ctx, time.Second)
	defer ncancel()
	if d, err := b.Results.Next(nctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a third result: %+v, %v; want none", d, err)
	}
}

// TestALostFenceKeyIsRaisedAgain: a fence key gone from the results stream (aged out with its
// MaxAge) is raised again by the holder's next result, and a newer acquisition still refuses
// the older holder's.
func TestALostFenceKeyIsRaisedAgain(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testServer(t)
	nc := testConn(t, srv)
	b := testBackend(t, ctx, nc, Config{InboxShards: 1})
	tn := mustTenant("p", "u")
	a, err := b.Leases.Acquire(ctx, tn, "a", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	s, err := js.Stream(ctx, streamResults)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(subjResults+"f."+tn.Subject())); err != nil {
		t.Fatal(err)
	}
	fr := b.Results.(broker.FencedResults)
	res := broker.Result{JobID: "j1", Tenant: tn, State: broker.StateDone}
	if err := fr.PublishFenced(ctx, tn, a.Token, res); err != nil {
		t.Fatalf("the holder's result after its fence key was lost: %v", err)
	}
	acquireOnceExpired(t, ctx, b, tn)
	res.JobID = "j2"
	if err := fr.PublishFenced(ctx, tn, a.Token, res); !errors.Is(err, broker.ErrLeaseLost) {
		t.Fatalf("the older holder's result after a newer acquisition: %v; want ErrLeaseLost", err)
	}
}

// TestALostSettleFenceKeyIsRaisedAgain: a fence key gone from the records' stream (aged out,
// or lost with a crash of the server before its asynchronous write) is raised again by the
// holder's next settle, and a newer acquisition still refuses the older holder's settles,
// leaving the job in the inbox.
func TestALostSettleFenceKeyIsRaisedAgain(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testServer(t)
	nc := testConn(t, srv)
	b := testBackend(t, ctx, nc, Config{InboxShards: 1})
	tn := mustTenant("p", "u")
	for i := range 2 {
		if err := b.Inbox.Publish(ctx, broker.Job{ID: fmt.Sprintf("j%d", i), Tenant: tn}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := b.Leases.Acquire(ctx, tn, "a", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	s, err := js.Stream(ctx, "KV_"+bucketJobs)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(jobsFenceSubject(tn))); err != nil {
		t.Fatal(err)
	}
	q, err := b.Inbox.Open(ctx, tn, broker.QueueOptions{AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	fa := broker.NewFence(b, a)
	next := func() broker.Delivery {
		d, err := q.Next(ctx, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return fa.Delivery(d)
	}
	if err := next().Ack(ctx); err != nil {
		t.Fatalf("the holder's ack after its fence key was lost: %v", err)
	}
	d := next()
	acquireOnceExpired(t, ctx, b, tn)
	if err := d.Ack(ctx); !errors.Is(err, broker.ErrLeaseLost) {
		t.Fatalf("the older holder's ack after a newer acquisition: %v; want ErrLeaseLost", err)
	}
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Inbox.Pending(ctx, tn); err != nil || n != 1 {
		t.Fatalf("pending after the refused ack: %d, %v; want 1", n, err)
	}
}

// acquireOnceExpired acquires tn for "b" once its current lease has run out.
func acquireOnceExpired(t *testing.T, ctx context.Context, b *broker.Backend, tn tenant.ID) broker.Lease {
	t.Helper()
	for {
		l, err := b.Leases.Acquire(ctx, tn, "b", time.Minute)
		if err == nil {
			return l
		}
		if !errors.Is(err, broker.ErrLeaseHeld) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFenceKeysAreNotRecords: the fence key and settle mark a fenced settle writes in the
// records' stream are neither read as records nor listed among the recent ones.
func TestFenceKeysAreNotRecords(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testServer(t)
	nc := testConn(t, srv)
	b := testBackend(t, ctx, nc, Config{InboxShards: 1})
	tn := mustTenant("p", "u")
	job := broker.Job{ID: broker.NewJobID(), Tenant: tn}
	if err := b.Jobs.Create(ctx, broker.QueuedRecord(job)); err != nil {
		t.Fatal(err)
	}
	if err := b.Inbox.Publish(ctx, job); err != nil {
		t.Fatal(err)
	}
	l, err := b.Leases.Acquire(ctx, tn, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	q, err := b.Inbox.Open(ctx, tn, broker.QueueOptions{AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	d, err := q.Next(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := broker.NewFence(b, l).Delivery(d).Ack(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"_fence." + tn.Subject(), "_done." + tn.Subject()} {
		if _, err := b.Jobs.Get(ctx, id); !errors.Is(err, broker.ErrNotFound) {
			t.Errorf("get %s: %v; want ErrNotFound", id, err)
		}
	}
	recs, err := b.Jobs.Recent(ctx, 10)
	if err != nil || len(recs) != 1 || recs[0].Job.ID != job.ID {
		t.Fatalf("recent: %+v, %v; want the one record", recs, err)
	}
}
