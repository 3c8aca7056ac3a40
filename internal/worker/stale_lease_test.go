package worker_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/natsjs/natsjstest"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/tenant"
	"github.com/webordinary/webordinary/internal/worker"
)

// TestATenantBehindAnExpiredLeaseTheEngineKeptIsClaimed is the state of a data dir seen stuck
// for good (issue 24): cafe/owner has 2 pending jobs, no claim request waits, and its lease
// record — a worker's of an earlier run, long past its expiresAt — is one the engine brought
// back after a crash and never expires again. Every claim's acquire found the key and gave
// up ("held"), so the reconciler asked forever. Started on that state, a router and a pool
// claim the tenant from the router's start-up pass: the reconcile period is an hour, so no
// later pass can help.
func TestATenantBehindAnExpiredLeaseTheEngineKeptIsClaimed(t *testing.T) {
	t.Parallel()
	env := natsjstest.Start(t, natsjstest.Options{NoSync: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tn, _ := tenant.New("cafe", "owner")
	keepExpiredLease(t, ctx, env, tn)
	ids := pendingWithoutClaims(t, ctx, env.Backend, tn, 2)

	r, err := router.New(router.Config{Backend: env.Backend, ReconcileEvery: time.Hour, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	f := &fixture{t: t, eng: engine{b: env.Backend, connect: func(t *testing.T) (*broker.Backend, func()) {
		nc, b := natsjstest.Connect(t, env)
		return b, nc.Close
	}}, b: env.Backend, router: r, ctx: ctx, leaseTTL: 2 * time.Second}
	f.pool(worker.Config{Workers: 4, Processor: worker.ProcessorFunc(func(context.Context, worker.Task) (worker.Outcome, error) {
		return worker.Outcome{Summary: "ok"}, nil
	})})
	for _, id := range ids {
		if rec := f.wait(id, 30*time.Second); rec.State != broker.StateDone {
			t.Fatalf("job %s: %s (%s)", id, rec.State, rec.LastError)
		}
	}
}

// keepExpiredLease leaves tn's lease record as the stuck data dir's engine kept it: acquired
// by a worker of an earlier run with a 15 s TTL, then back after its expiry with no TTL the
// engine acts on (a plain write over it, past expiresAt).
func keepExpiredLease(t *testing.T, ctx context.Context, env *natsjstest.Env, tn tenant.ID) {
	t.Helper()
	old, err := env.Backend.Leases.Acquire(ctx, tn, "worker-of-an-earlier-run", 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(env.Conn)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "wo_leases")
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Minute)
	data, _ := json.Marshal(map[string]any{"owner": old.Owner, "claimedAt": past.Add(-old.TTL), "expiresAt": past, "ttl": old.TTL})
	if _, err := kv.Put(ctx, tn.Subject(), data); err != nil {
		t.Fatal(err)
	}
}

// pendingWithoutClaims queues n jobs for tn, as a router with no worker would (each
// requesting a claim), then takes the claim requests as the workers that found the lease
// held did: n jobs pending, no claim request waiting.
func pendingWithoutClaims(t *testing.T, ctx context.Context, b *broker.Backend, tn tenant.ID, n int) []string {
	t.Helper()
	r, err := router.New(router.Config{Backend: b, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range n {
		rec, err := r.Submit(ctx, router.Request{Project: tn.Project, User: tn.User, Thread: "t1", Instruction: string(rune('a' + i))})
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
		ids = append(ids, rec.Job.ID)
	}
	for {
		w, err := b.Claims.Waiting(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if w == 0 {
			break
		}
		c, err := b.Claims.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Ack(ctx)
	}
	if got, err := b.Inbox.Pending(ctx, tn); err != nil || got != n {
		t.Fatalf("pending: %d, %v; want %d", got, err, n)
	}
	return ids
}
