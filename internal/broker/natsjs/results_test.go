package natsjs

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
)

// TestResultsAreShardedAndAllRead: a tenant's results go to the result shard of its inbox
// shard (one stream's synced writes, one after another, bounded the jobs finished per
// second), and the router's Next reads every shard: each result once, a tenant's in order.
func TestResultsAreShardedAndAllRead(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testServer(t)
	nc := testConn(t, srv)
	worker := testBackend(t, ctx, nc, Config{InboxShards: 3})
	router := testBackend(t, ctx, testConn(t, srv), Config{})
	const tenants, each = 12, 3
	for j := range each {
		for i := range tenants {
			tn := mustTenant("p", fmt.Sprint("u", i))
			res := broker.Result{JobID: fmt.Sprint("j", i, "-", j), Tenant: tn, State: broker.StateDone}
			if err := worker.Results.Publish(ctx, res); err != nil {
				t.Fatal(err)
			}
		}
	}
	js, _ := jetstream.New(nc)
	used := 0
	for k := range 3 {
		name, _ := resultShardNamed(k)
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("result shard %s: %v", name, err)
		}
		if n := s.CachedInfo().State.Msgs; n > 0 {
			used++
		}
	}
	if used < 2 {
		t.Fatalf("results of %d tenants in %d of 3 shards", tenants, used)
	}
	next := map[string]int{} // tenant: its next result's number
	for range tenants * each {
		d, err := router.Results.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res := d.Result()
		if want := fmt.Sprint("j", res.Tenant.User[1:], "-", next[res.Tenant.User]); res.JobID != want {
			t.Fatalf("got %s, want %s", res.JobID, want)
		}
		next[res.Tenant.User]++
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if d, err := router.Results.Next(short); err == nil {
		t.Fatalf("a result more: %s", d.Result().JobID)
	}
}

// TestAClosedBackendGivesBackTheResultsItFetched: each shard's pull fetches one result ahead
// of Next; Close gives it back, so another router has it at once, not after the ack wait.
func TestAClosedBackendGivesBackTheResultsItFetched(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testServer(t)
	cfg := Config{InboxShards: 2, ResultAckWait: time.Hour}
	first := testBackend(t, ctx, testConn(t, srv), cfg)
	for i := range 4 {
		res := broker.Result{JobID: fmt.Sprint("j", i), Tenant: mustTenant("p", fmt.Sprint("u", i)), State: broker.StateDone}
		if err := first.Results.Publish(ctx, res); err != nil {
			t.Fatal(err)
		}
	}
	d, err := first.Results.Next(ctx) // the pulls start, and fetch ahead
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the pulls hold the next ones
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second := testBackend(t, ctx, testConn(t, srv), cfg)
	within, cancelWithin := context.WithTimeout(ctx, 10*time.Second)
	defer cancelWithin()
	for range 3 {
		d, err := second.Results.Next(within)
		if err != nil {
			t.Fatalf("the results the closed backend held: %v (ack wait an hour)", err)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestResultsArePulledInBatches: the router's pulls ask for many results at once and stay
// open for more, rather than one pull request (a request and a reply on both sides) per
// result: results already stored and results published one by one while Next waits.
func TestResultsArePulledInBatches(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testServer(t)
	nc := testConn(t, srv)
	var pulls atomic.Int64
	sub, err := nc.Subscribe("$JS.API.CONSUMER.MSG.NEXT.>", func(*nats.Msg) { pulls.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	worker := testBackend(t, ctx, testConn(t, srv), Config{InboxShards: 1})
	router := testBackend(t, ctx, testConn(t, srv), Config{InboxShards: 1})
	tn := mustTenant("p", "u")
	publish := func(i int) {
		if err := worker.Results.Publish(ctx, broker.Result{JobID: fmt.Sprint("j", i), Tenant: tn, State: broker.StateDone}); err != nil {
			t.Fatal(err)
		}
	}
	take := func(i int) {
		d, err := router.Results.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := d.Result().JobID, fmt.Sprint("j", i); got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	const stored, oneByOne = 40, 20
	for i := range stored {
		publish(i)
	}
	for i := range stored {
		take(i)
	}
	for i := stored; i < stored+oneByOne; i++ {
		publish(i)
		take(i)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := pulls.Load(); n > 4 {
		t.Fatalf("%d pull requests for %d results", n, stored+oneByOne)
	}
}

// TestCloseEndsTheResultPulls: Close returns promptly while the pulls wait for results, with
// none held and with more than a batch held, after the first pull requests expired.
func TestCloseEndsTheResultPulls(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := testServer(t)
	for round, held := range []int{0, 70} {
		b, err := New(ctx, testConn(t, srv), Config{ResultAckWait: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for i := range held {
			res := broker.Result{JobID: fmt.Sprint("r", round, "-", i), Tenant: mustTenant("p", fmt.Sprint("u", i)), State: broker.StateDone}
			if err := b.Results.Publish(ctx, res); err != nil {
				t.Fatal(err)
			}
		}
		waiting, stop := context.WithTimeout(ctx, time.Second) // the pulls start and wait
		if d, err := b.Results.Next(waiting); err == nil {
			_ = d.Ack(ctx)
		}
		stop()
		time.Sleep(resultWait + time.Second) // past the first pull requests' expiry
		closed := make(chan error, 1)
		go func() { closed <- b.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d (%d results): Close did not return within 30 s", round, held)
		}
	}
}
