package natsjs

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/tenant"
)

// TestPendingCountsWithAndWithoutDirectGets: Pending counts a tenant's messages (waiting and
// in flight) the same whether it reads them with a direct get or, on a stream whose direct
// gets an older binary turned off, from the stream's info.
func TestPendingCountsWithAndWithoutDirectGets(t *testing.T) {
	t.Parallel()
	ctx, b, nc := aServer(t, Config{InboxShards: 1})
	alice := mustTenant("p", "alice")
	publishJobs(t, ctx, b, alice, "j", 3)
	in := b.Inbox.(*inbox)
	sh := in.a.shardOf(alice)
	if n, _, ok := directPending(ctx, nc, sh, sh.subject+alice.Subject()); !ok || n != 3 {
		t.Fatalf("direct count %d, %v; want 3 by a direct get", n, ok)
	}
	q := openTenant(t, ctx, b, alice)
	d, err := q.Next(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string, forAlice int) {
		t.Helper()
		for tn, want := range map[tenant.ID]int{alice: forAlice, mustTenant("p", "bob"): 0} {
			if n, err := b.Inbox.Pending(ctx, tn); err != nil || n != want {
				t.Errorf("%s: %s pending %d, %v; want %d", when, tn, n, err, want)
			}
		}
	}
	check("one in flight", 3)
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(ctx); err != nil { // which removes it
		t.Fatal(err)
	}
	check("one acknowledged", 2)

	// An older binary's setup turns direct gets off; this process's cached config still
	// says on: the direct get finds no one to answer, and the count comes from the info.
	js, _ := jetstream.New(nc)
	cfg := sh.CachedInfo().Config
	cfg.AllowDirect = false
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := directPending(ctx, nc, sh, sh.subject+alice.Subject()); ok {
		t.Fatal("a stream without direct gets answered one")
	}
	check("direct gets off", 2)
}
