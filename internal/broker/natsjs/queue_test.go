package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// TestAWaitingOwnerIsWokenByAPublish: an owner waiting for its tenant's next job gets one
// published meanwhile by another client at once, on the publish's signal: its reads without
// one are set an hour apart here, as is the wait, and each job must come within 10 s.
func TestAWaitingOwnerIsWokenByAPublish(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testServer(t)
	router, worker := testBackend(t, ctx, testConn(t, srv), Config{}), testBackend(t, ctx, testConn(t, srv), Config{})
	tn := mustTenant("p", "u")
	q := openTenant(t, ctx, worker, tn)
	q.poll = time.Hour
	for i := range 5 { // before the wait's subscription, as it is made, and after
		id := fmt.Sprint("j", i)
		go func() {
			time.Sleep(time.Duration(i) * 25 * time.Millisecond)
			if err := router.Inbox.Publish(ctx, testJob(id, tn)); err != nil {
				t.Error(err)
			}
		}()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		takeInOrder(t, wctx, q, time.Hour, id) // fails when no signal wakes the wait
		cancel()
	}
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAWaitingOwnerFindsAJobPublishedWithoutASignal: a job stored by a client that sends no
// signal (an older binary's router) is read on the wait's next read without one.
func TestAWaitingOwnerFindsAJobPublishedWithoutASignal(t *testing.T) {
	t.Parallel()
	ctx, b, nc := aServer(t, Config{})
	tn := mustTenant("p", "u")
	q := openTenant(t, ctx, b, tn)
	js, _ := jetstream.New(nc)
	data, _ := json.Marshal(testJob("j", tn))
	go func() {
		time.Sleep(100 * time.Millisecond)
		if _, err := js.Publish(ctx, b.Inbox.(*inbox).a.shardOf(tn).subject+tn.Subject(), data); err != nil {
			t.Error(err)
		}
	}()
	d, err := q.Next(ctx, 10*time.Second)
	if err != nil || d.Job().ID != "j" {
		t.Fatalf("a job published without a signal during a 10 s wait: %v", err)
	}
}

// TestAQueueReadsWithoutDirectGets: on a stream whose direct gets are off (an older binary's
// setup turned them off, and this process's cached config still says on) a queue reads the
// tenant's jobs through the leader's message get, as on more replicas: in order, with their
// headers, one at a time, and removes them.
func TestAQueueReadsWithoutDirectGets(t *testing.T) {
	t.Parallel()
	ctx, b, nc := aServer(t, Config{InboxShards: 1})
	tn := mustTenant("p", "u")
	var jobs []broker.Job
	for i := range 3 {
		job := testJob(fmt.Sprint("j", i), tn)
		if err := b.Jobs.Create(ctx, broker.JobRecord{Job: job, State: broker.StateQueued}); err != nil {
			t.Fatal(err)
		}
		if err := b.Inbox.Publish(ctx, job); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, job)
	}
	js, _ := jetstream.New(nc)
	cfg := b.Inbox.(*inbox).a.shardOf(tn).CachedInfo().Config
	cfg.AllowDirect = false
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	q := openTenant(t, ctx, b, tn)
	for _, job := range jobs {
		d, err := q.Next(ctx, 5*time.Second)
		if err != nil || d.Job().ID != job.ID {
			t.Fatalf("want %s: %v", job.ID, err)
		}
		if d.(*delivery).created == 0 {
			t.Errorf("%s read without its record's revision (its message's header)", job.ID)
		}
		if _, err := q.Next(ctx, 0); !errors.Is(err, broker.ErrNoMessage) {
			t.Fatalf("with %s unsettled: %v, want nothing", job.ID, err)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	closeNonePending(t, ctx, b, q, tn, "")
}

// TestCloseWaitsForTheRemovals: Ack does not wait for the message's removal, Close does, so a
// release that counts the tenant's pending jobs after closing its queue does not count those
// it has done (and ask for a claim that finds nothing).
func TestCloseWaitsForTheRemovals(t *testing.T) {
	t.Parallel()
	ctx, b, _ := aServer(t, Config{})
	tn := mustTenant("p", "u")
	for round := range 20 {
		ids := publishJobs(t, ctx, b, tn, fmt.Sprint(round, "-"), 3)
		q := openTenant(t, ctx, b, tn)
		takeInOrder(t, ctx, q, 5*time.Second, ids...)
		closeNonePending(t, ctx, b, q, tn, fmt.Sprint(" (round ", round, ")"))
	}
}

// TestATenuresAcksAreRemovedTogether: an owner that keeps finding jobs removes the ones it has
// done every maxOwed acknowledgements and at Close, one purge each, not one removal per job
// (a synced write and an API request each).
func TestATenuresAcksAreRemovedTogether(t *testing.T) {
	t.Parallel()
	ctx, b, nc := aServer(t, Config{})
	removals := countRemovals(t, nc)
	tn := mustTenant("p", "u")
	ids := publishJobs(t, ctx, b, tn, "j", 2*maxOwed+3)
	q := openTenant(t, ctx, b, tn)
	takeInOrder(t, ctx, q, 5*time.Second, ids...)
	closeNonePending(t, ctx, b, q, tn, "")
	if n := removals(); n > 3 {
		t.Fatalf("%d removal requests for %d jobs; want at most 3 (two full batches and Close's)", n, len(ids))
	}
}

// TestAnOwnerFedJobByJobRemovesThemTogether: an owner that finds nothing, then gets the next
// job on its publish's signal, job after job (a steady stream slower than the owner), does not
// remove each job alone: it removes when it idles, reading nothing twice at the same cursor.
func TestAnOwnerFedJobByJobRemovesThemTogether(t *testing.T) {
	t.Parallel()
	ctx, b, nc := aServer(t, Config{})
	removals := countRemovals(t, nc)
	tn := mustTenant("p", "u")
	q := openTenant(t, ctx, b, tn)
	const jobs = 10
	for i := range jobs {
		go func() {
			time.Sleep(20 * time.Millisecond) // the owner is waiting by then
			if err := b.Inbox.Publish(ctx, testJob(fmt.Sprint("j", i), tn)); err != nil {
				t.Error(err)
			}
		}()
		takeInOrder(t, ctx, q, 5*time.Second, fmt.Sprint("j", i))
	}
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The first wait reads twice (before and after it starts listening): one removal then,
	// and Close's.
	if n := removals(); n > 2 {
		t.Fatalf("%d removal requests for %d jobs fed one by one; want at most 2", n, jobs)
	}
	if n, err := b.Inbox.Pending(ctx, tn); err != nil || n != 0 {
		t.Fatalf("pending after Close: %d, %v; want 0", n, err)
	}
}

// countRemovals counts the removal requests (purges and single deletes) made on nc's server
// from now on; the returned func counts those made so far.
func countRemovals(t *testing.T, nc *nats.Conn) func() int64 {
	t.Helper()
	var n atomic.Int64
	for _, subj := range []string{"$JS.API.STREAM.PURGE.>", "$JS.API.STREAM.MSG.DELETE.>"} {
		sub, err := nc.Subscribe(subj, func(*nats.Msg) { n.Add(1) })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() int64 {
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		return n.Load()
	}
}

// TestAnOwnerWithNothingToDoRemovesWhatItDid: the acknowledged jobs leave the stream once the
// owner finds nothing more, without waiting for Close (a tenant owned and idle is not counted
// as pending work).
func TestAnOwnerWithNothingToDoRemovesWhatItDid(t *testing.T) {
	t.Parallel()
	ctx, b, _ := aServer(t, Config{})
	tn := mustTenant("p", "u")
	ids := publishJobs(t, ctx, b, tn, "j", 3)
	q := openTenant(t, ctx, b, tn)
	defer func() { _ = q.Close(ctx) }()
	takeInOrder(t, ctx, q, 5*time.Second, ids...)
	if _, err := q.Next(ctx, 10*time.Millisecond); !errors.Is(err, broker.ErrNoMessage) {
		t.Fatalf("want no message, got %v", err)
	}
	eventuallyNonePending(t, ctx, b, tn, "the owner found nothing")
}

// TestAConsumerAnOlderBinaryLeftDoesNotHoldTheTenant: an older binary read a tenant through a
// consumer of its own and left it with a delivery in flight (it crashed). The tenant's next
// owner reads that job at once, and the ones behind it, in order.
func TestAConsumerAnOlderBinaryLeftDoesNotHoldTheTenant(t *testing.T) {
	t.Parallel()
	ctx, b, _ := aServer(t, Config{})
	tn := mustTenant("p", "u")
	ids := publishJobs(t, ctx, b, tn, "j", 3)
	sh := b.Inbox.(*inbox).a.shardOf(tn)
	old, err := sh.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "in_" + tn.Name(), FilterSubject: sh.subject + tn.Subject(), AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: time.Hour, MaxAckPending: 1, MaxDeliver: -1, MemoryStorage: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := fetchOne(ctx, old, time.Second); err != nil || m == nil {
		t.Fatalf("the older binary's fetch: %v", err)
	}
	q := openTenant(t, ctx, b, tn)
	takeInOrder(t, ctx, q, 5*time.Second, ids...)
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestADroppedQueueStopsListening: a queue listens for its tenant's signals from its first
// wait; one its owner drops without closing it (the lease was lost: the owner touches nothing
// more) stops listening once it is collected, and a closed one at once.
func TestADroppedQueueStopsListening(t *testing.T) {
	t.Parallel()
	ctx, b, nc := aServer(t, Config{})
	wait := func(q broker.Queue) {
		if _, err := q.Next(ctx, 5*time.Millisecond); !errors.Is(err, broker.ErrNoMessage) {
			t.Fatalf("next on an empty queue: %v", err)
		}
	}
	before := nc.NumSubscriptions()
	q := openTenant(t, ctx, b, mustTenant("p", "closed"))
	wait(q)
	if n := nc.NumSubscriptions(); n != before+1 {
		t.Fatalf("a waiting queue: %d subscriptions, want %d", n, before+1)
	}
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := nc.NumSubscriptions(); n != before {
		t.Fatalf("a closed queue: %d subscriptions, want %d", n, before)
	}
	func() { wait(openTenant(t, ctx, b, mustTenant("p", "dropped"))) }()
	deadline := time.Now().Add(10 * time.Second)
	for nc.NumSubscriptions() != before {
		if time.Now().After(deadline) {
			t.Fatalf("a dropped queue still listens: %d subscriptions, want %d", nc.NumSubscriptions(), before)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAnIdleOwnerReadsOnceAPoll: an owner with nothing to do calls Next again and again with
// short waits (the worker's PollWait, 100 ms). It reads once a poll, not once a call, and
// the signals of jobs it has already read do not each cost a read later.
func TestAnIdleOwnerReadsOnceAPoll(t *testing.T) {
	t.Parallel()
	ctx, b, _ := aServer(t, Config{})
	tn := mustTenant("p", "u")
	q := openTenant(t, ctx, b, tn)
	q.poll = 300 * time.Millisecond
	if _, err := q.Next(ctx, time.Millisecond); !errors.Is(err, broker.ErrNoMessage) { // now listening
		t.Fatal(err)
	}
	takeInOrder(t, ctx, q, time.Second, publishJobs(t, ctx, b, tn, "j", 100)...)
	before, start := q.reads.Load(), time.Now()
	for time.Since(start) < 1500*time.Millisecond {
		if _, err := q.Next(ctx, 20*time.Millisecond); !errors.Is(err, broker.ErrNoMessage) {
			t.Fatal(err)
		}
	}
	// 1.5 s of 20 ms waits: about 75 calls; a read every 300 ms is 5 or 6 (and one for a
	// signal still on its way).
	if n := q.reads.Load() - before; n > 12 {
		t.Fatalf("an idle owner read %d times in 1.5 s with reads 300 ms apart: want about 6", n)
	}
}

// aServer is a backend on a server of its own, its connection, and a minute for the test.
func aServer(t *testing.T, cfg Config) (context.Context, *broker.Backend, *nats.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	nc := testConn(t, testServer(t))
	return ctx, testBackend(t, ctx, nc, cfg), nc
}

func openTenant(t *testing.T, ctx context.Context, b *broker.Backend, tn tenant.ID) *queue {
	t.Helper()
	q, err := b.Inbox.Open(ctx, tn, broker.QueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return q.(*queue)
}

// publishJobs publishes n jobs to tn, named prefix and their number, and returns their ids in order.
func publishJobs(t *testing.T, ctx context.Context, b *broker.Backend, tn tenant.ID, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint(prefix, i)
		if err := b.Inbox.Publish(ctx, testJob(ids[i], tn)); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// takeInOrder takes q's next deliveries, each within wait, which must be ids in order, and
// acknowledges each.
func takeInOrder(t *testing.T, ctx context.Context, q broker.Queue, wait time.Duration, ids ...string) {
	t.Helper()
	for _, id := range ids {
		d, err := q.Next(ctx, wait)
		if err != nil {
			t.Fatalf("want %s: %v", id, err)
		}
		if d.Job().ID != id {
			t.Fatalf("got %s, want %s", d.Job().ID, id)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAnUndecodableJobIsRemovedAndPassed: a message that is not a job could never run and
// would pin its owner: it is passed over, removed (with nothing behind it, once the owner
// idles), and a job published behind it is delivered.
func TestAnUndecodableJobIsRemovedAndPassed(t *testing.T) {
	t.Parallel()
	ctx, b, nc := aServer(t, Config{})
	tn := mustTenant("p", "u")
	js, _ := jetstream.New(nc)
	subj := b.Inbox.(*inbox).a.shardOf(tn).subject + tn.Subject()
	if _, err := js.Publish(ctx, subj, []byte("not a job")); err != nil {
		t.Fatal(err)
	}
	q := openTenant(t, ctx, b, tn)
	// An owner with nothing to do calls Next again and again; a short wait may end before
	// the first read has even reached the undecodable message (a loaded machine, -race).
	deadline := time.Now().Add(10 * time.Second)
	for {
		if d, err := q.Next(ctx, 10*time.Millisecond); !errors.Is(err, broker.ErrNoMessage) {
			t.Fatalf("an undecodable message alone: %v, %v; want no message", d, err)
		}
		if n, err := b.Inbox.Pending(ctx, tn); err == nil && n == 0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("pending 10s after the owner idled past the undecodable message: %d, %v; want 0", n, err)
		}
	}
	ids := publishJobs(t, ctx, b, tn, "j", 1)
	takeInOrder(t, ctx, q, 5*time.Second, ids...)
	if _, err := js.Publish(ctx, subj, []byte("not a job either")); err != nil {
		t.Fatal(err)
	}
	more := publishJobs(t, ctx, b, tn, "k", 1)
	takeInOrder(t, ctx, q, 5*time.Second, more...)
	closeNonePending(t, ctx, b, q, tn, "")
}

// eventuallyNonePending waits up to 10 s for tn to have no pending message.
func eventuallyNonePending(t *testing.T, ctx context.Context, b *broker.Backend, tn tenant.ID, after string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := b.Inbox.Pending(ctx, tn)
		if err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending 10s after %s: %d, %v; want 0", after, n, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// closeNonePending closes q and checks that tn has nothing pending right after (Close waits
// for the removals); what is added to the failure's message.
func closeNonePending(t *testing.T, ctx context.Context, b *broker.Backend, q broker.Queue, tn tenant.ID, what string) {
	t.Helper()
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Inbox.Pending(ctx, tn); err != nil || n != 0 {
		t.Fatalf("%s pending right after Close%s: %d, %v; want 0", tn, what, n, err)
	}
}

// TestAnOwnerReadsItsQueuedJobsAhead: an owner whose tenant has jobs queued reads several of
// them in one request (a direct get of a batch) rather than one request per job, and still
// takes them one at a time, in order, and each only once acknowledged.
func TestAnOwnerReadsItsQueuedJobsAhead(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := testBackend(t, ctx, testConn(t, testServer(t)), Config{InboxShards: 1})
	tn := mustTenant("p", "u")
	ids := publishJobs(t, ctx, b, tn, "j", 20)
	q := openTenant(t, ctx, b, tn)
	takeInOrder(t, ctx, q, 5*time.Second, ids...)
	if n := q.reads.Load(); n > 4 {
		t.Fatalf("%d reads for %d queued jobs", n, len(ids))
	}
	// A job published after the reads ahead is read too, after them.
	more := publishJobs(t, ctx, b, tn, "k", 1)
	takeInOrder(t, ctx, q, 5*time.Second, more...)
}

// TestAnOwnerStartsFromItsCount: a worker counts a tenant's jobs (a direct get of its first
// message) before it takes the lease, then opens the queue: that read is the queue's first,
// not asked again. Only once: a queue opened again reads for itself, and finds what the first
// one left.
func TestAnOwnerStartsFromItsCount(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := testBackend(t, ctx, testConn(t, testServer(t)), Config{InboxShards: 1})
	tn := mustTenant("p", "u")
	ids := publishJobs(t, ctx, b, tn, "j", 3)
	if n, err := b.Inbox.Pending(ctx, tn); err != nil || n != 3 {
		t.Fatalf("pending %d, %v; want 3", n, err)
	}
	q := openTenant(t, ctx, b, tn)
	takeInOrder(t, ctx, q, 5*time.Second, ids[0])
	if n := q.reads.Load(); n != 0 {
		t.Fatalf("%d reads for the job the count read", n)
	}
	if d, err := q.Next(ctx, 5*time.Second); err != nil || d.Job().ID != ids[1] || d.Behind() != 1 {
		t.Fatalf("then %+v, %v; want %s with 1 behind", d, err, ids[1])
	}
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	again := openTenant(t, ctx, b, tn)
	takeInOrder(t, ctx, again, 5*time.Second, ids[1:]...)
	if n := again.reads.Load(); n == 0 {
		t.Fatal("a queue opened again took the count's read as its own")
	}
}

// TestABatchReadAllocatesLittle: a read of a tenant's queued jobs in one batch listens on an
// inbox of its own for the answers; the client's default for a subscription's buffer is 64K
// messages (half a megabyte, allocated and cleared for every batch, and a garbage collection
// sooner), where a batch is at most maxAhead messages and its end. Not parallel: it counts the
// whole process's allocations.
func TestABatchReadAllocatesLittle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc := testConn(t, testServer(t))
	b := testBackend(t, ctx, nc, Config{InboxShards: 1})
	tn := mustTenant("p", "u")
	publishJobs(t, ctx, b, tn, "j", maxAhead)
	sh := b.Inbox.(*inbox).a.shardOf(tn)
	const reads = 40
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range reads {
		msgs, err := sh.directBatch(ctx, nc, sh.subject+tn.Subject(), 1, maxAhead)
		if err != nil || len(msgs) != maxAhead {
			t.Fatalf("%d messages, %v; want %d", len(msgs), err, maxAhead)
		}
	}
	runtime.ReadMemStats(&after)
	per := (after.TotalAlloc - before.TotalAlloc) / reads
	t.Logf("%d KiB allocated per batch read", per>>10)
	if per > 256<<10 {
		t.Fatalf("%d KiB allocated per batch read of %d jobs", per>>10, maxAhead)
	}
}
