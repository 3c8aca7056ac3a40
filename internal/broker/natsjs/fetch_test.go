package natsjs

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
)

// TestShortWaitsLoseNoDelivery: an owner waits briefly for its tenant's next job (10 ms when
// other tenants wait for a worker) while the job arrives at any moment. A job stored as the
// owner's wait ends must still reach it, by the next read or the publish's signal: when the
// queue was a consumer, a delivery the server made as the client gave up went to a closed
// inbox and held the tenant for the whole AckWait (seen in bench: 15 s stalls, the default
// lease TTL; fetchOne now waits for the server's answer, which the results' pulls use).
// Every job published here is received within 2 s, not the minute's AckWait.
func TestShortWaitsLoseNoDelivery(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := testServer(t)
	router := testBackend(t, ctx, testConn(t, srv), Config{})
	worker := testBackend(t, ctx, testConn(t, srv), Config{})
	// Busy goroutines make the engine late to answer, as on a loaded machine: the race is
	// between the client's end of the wait and a delivery the server makes at its own end.
	var stop atomic.Bool
	defer stop.Store(true)
	for range 2 * runtime.GOMAXPROCS(0) {
		go func() {
			for !stop.Load() { // spin
			}
		}()
	}
	const jobs = 120 // without the fix, a delivery was lost within the first 40 in 5 runs of 5
	tn := mustTenant("p", "u")
	q, err := worker.Inbox.Open(ctx, tn, broker.QueueOptions{AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for i := range jobs {
		id := fmt.Sprintf("j%03d", i)
		go func() {
			time.Sleep(time.Duration(i%7) * 300 * time.Microsecond) // lands before, at or after a wait ends
			_ = router.Inbox.Publish(ctx, testJob(id, tn))
		}()
		deadline := time.Now().Add(2 * time.Second)
		for {
			d, err := q.Next(ctx, time.Duration(1+i%3)*time.Millisecond)
			if errors.Is(err, broker.ErrNoMessage) {
				if time.Now().After(deadline) {
					t.Fatalf("job %d of %d not received within 2s of its publish: a delivery was lost (it waits out the AckWait)", i+1, jobs)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Job().ID != id {
				t.Fatalf("received %s, want %s", d.Job().ID, id)
			}
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
}

// TestAPullWithNoWaitTellsNoResponders: the shortest pull (no wait, fetchOne's last when
// less than a millisecond is left) on a consumer no server answers for says so, as a longer
// one does. It said "no message", and a tenant's queue whose consumer had lost its leader was
// then taken for an empty one (seen in CI on a loaded machine, its 50 ms wait spent in
// back-offs), when tenants' queues were consumers; the results' consumer pulls the same way.
func TestAPullWithNoWaitTellsNoResponders(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := testBackend(t, ctx, testConn(t, testServer(t)), Config{})
	s := b.Inbox.(*inbox).a.inbox[0]
	c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "gone", AckPolicy: jetstream.AckExplicitPolicy, MemoryStorage: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteConsumer(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	for _, wait := range []time.Duration{0, 20 * time.Millisecond} {
		if _, err := fetchOne(ctx, c, wait); !errors.Is(err, nats.ErrNoResponders) {
			t.Errorf("a pull waiting %s on a consumer that is gone: %v, want no responders", wait, err)
		}
	}
}
