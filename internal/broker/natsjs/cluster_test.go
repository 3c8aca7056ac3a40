package natsjs_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/natsjs"
	"github.com/webordinary/webordinary/internal/broker/natsjs/natsjstest"
	"github.com/webordinary/webordinary/internal/tenant"
)

// TestEmbeddedEnginesFormACluster: three embedded engines (three serves' worth) given each
// other's addresses form one cluster with every stream replicated three times, the third
// started 3 s after the others (which wait for it): a job accepted through one member is run
// through another, and after a member goes the other two still accept and hand out jobs.
func TestEmbeddedEnginesFormACluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ports := natsjstest.FreeAddrs(t, 3)
	routes := strings.Join(ports, ",")
	opts := broker.Options{User: "wo", Password: "a long shared secret", NoSync: true}
	members := make([]*broker.Backend, 3)
	urls := make([]string, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range members {
		urls[i] = natsjs.EmbeddedURL(filepath.Join(t.TempDir(), "nats")) +
			fmt.Sprintf("?cluster=wo&cluster_listen=%s&routes=%s&name=n%d", ports[i], routes, i)
		wg.Go(func() {
			if i == 2 {
				time.Sleep(3 * time.Second)
			}
			members[i], errs[i] = broker.Open(ctx, urls[i], opts)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("member %d: %v", i, err)
			continue
		}
		t.Cleanup(func() { _ = members[i].Close() })
	}
	if t.Failed() {
		t.FailNow()
	}
	if d := members[1].Describe; !strings.Contains(d, "member n1 of cluster wo") {
		t.Errorf("Describe %q", d)
	}
	// A member's raft groups elect a new leader after 2.5–4.5 s without one, not nats-server's 4–9 s.
	if inForce, want := natsjs.RaftTiming(); inForce != want {
		t.Errorf("raft timing (min election, max election, heartbeat) %v; want the embedded cluster's %v", inForce, want)
	}
	run := func(via, through *broker.Backend, id string) {
		t.Helper()
		tid := tenant.ID{Project: "p", User: id}
		if err := via.Inbox.Publish(ctx, broker.Job{ID: id, Tenant: tid, Payload: []byte(`"x"`), AcceptedAt: time.Now()}); err != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
		q, err := through.Inbox.Open(ctx, tid, broker.QueueOptions{})
		if err != nil {
			t.Fatalf("open %s: %v", id, err)
		}
		defer func() { _ = q.Close(ctx) }()
		d, err := q.Next(ctx, 10*time.Second)
		if err != nil || d.Job().ID != id {
			t.Fatalf("%s: next %v", id, err)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	run(members[0], members[2], "first")
	// Jobs published through one member, each on a fresh tenant whose consumer is made and
	// read at once through another, as "first" above (the shape CI failed 1 run in 12: a
	// pull answered "no responders" a moment after its consumer was made, before the
	// cluster had told every server where the consumer lives).
	for i := range 9 {
		run(members[i%3], members[(i+1)%3], fmt.Sprintf("fresh%d", i))
	}
	fencedRecordsAcross(t, ctx, members[0], members[1])
	staleDuplicateAckAcross(t, ctx, members[0], members[1])
	if err := members[0].Close(); err != nil {
		t.Fatal(err)
	}
	// Two of three keep a quorum; a stream whose leader was member 0 elects another.
	left := time.Now()
	deadline := left.Add(time.Minute)
	for {
		err := tryOnce(ctx, members[1], members[2])
		if err == nil {
			t.Logf("a job ran through the other two %s after member 0 left", time.Since(left).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after a member left, the other two still fail: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// The member comes back on its directory (a restart) and serves again.
	back, err := broker.Open(ctx, urls[0], opts)
	if err != nil {
		t.Fatalf("member 0 back on its directory: %v", err)
	}
	t.Cleanup(func() { _ = back.Close() })
	if err := tryOnce(ctx, back, members[1]); err != nil {
		t.Fatalf("a job through the member that came back: %v", err)
	}
}

// fencedRecordsAcross: on replicated streams (whose fenced record writes read from the
// leader), a holder's record write through one member passes, and once a newer owner
// acquired the tenant through another, the older holder's next write is refused by the
// store, while the newer owner's passes.
func fencedRecordsAcross(t *testing.T, ctx context.Context, one, other *broker.Backend) {
	t.Helper()
	tn := tenant.ID{Project: "p", User: "fenced"}
	id, err := broker.JobIDFor(broker.NewJobID(), tn)
	if err != nil {
		t.Fatal(err)
	}
	if err := one.Jobs.Create(ctx, broker.QueuedRecord(broker.Job{ID: id, Tenant: tn})); err != nil {
		t.Fatal(err)
	}
	a, err := other.Leases.Acquire(ctx, tn, "a", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	mark := func(s broker.State) func(*broker.JobRecord) error {
		return func(r *broker.JobRecord) error { r.State = s; return nil }
	}
	fa := broker.NewFence(other, a)
	if _, err := fa.UpdateJob(ctx, id, mark(broker.StateRunning)); err != nil {
		t.Fatalf("the holder's write: %v", err)
	}
	b := natsjs.AcquireOnceExpired(t, ctx, one, tn)
	if _, err := fa.UpdateJob(ctx, id, mark(broker.StateDone)); !errors.Is(err, broker.ErrLeaseLost) {
		t.Fatalf("the older holder's write after a newer acquisition: %v; want ErrLeaseLost", err)
	}
	rec, err := broker.NewFence(one, b).UpdateJob(ctx, id, mark(broker.StateDone))
	if err != nil || rec.LeaseToken != b.Token {
		t.Fatalf("the newer owner's write: %+v, %v", rec, err)
	}
}

// staleDuplicateAckAcross: a cluster answers a result published again (its message id seen)
// as a duplicate before it checks the fence, so an older holder's copy of the newer owner's
// result is not refused; its Ack of the job must still be.
func staleDuplicateAckAcross(t *testing.T, ctx context.Context, one, other *broker.Backend) {
	t.Helper()
	tn := tenant.ID{Project: "p", User: "duplicate"}
	id, err := broker.JobIDFor(broker.NewJobID(), tn)
	if err != nil {
		t.Fatal(err)
	}
	if err := one.Inbox.Publish(ctx, broker.Job{ID: id, Tenant: tn}); err != nil {
		t.Fatal(err)
	}
	a, err := other.Leases.Acquire(ctx, tn, "a", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	q, err := other.Inbox.Open(ctx, tn, broker.QueueOptions{AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = q.Close(ctx) }()
	d, err := q.Next(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fa := broker.NewFence(other, a)
	d = fa.Delivery(d)
	b := natsjs.AcquireOnceExpired(t, ctx, one, tn)
	res := broker.Result{JobID: id, Tenant: tn, State: broker.StateDone}
	if err := broker.NewFence(one, b).PublishResult(ctx, res); err != nil {
		t.Fatalf("the newer owner's result: %v", err)
	}
	if err := fa.PublishResult(ctx, res); err != nil && !errors.Is(err, broker.ErrLeaseLost) {
		t.Fatalf("the older holder's copy of it: %v", err)
	}
	if err := d.Ack(ctx); !errors.Is(err, broker.ErrLeaseLost) {
		t.Fatalf("the older holder's ack after its copy of the result: %v; want ErrLeaseLost", err)
	}
}

// TestASingleServersDirectoryIsNotMadeAClusterMember: a cluster deletes streams it did not
// make, so a directory a single engine wrote is refused as a member's, with what to do.
func TestASingleServersDirectoryIsNotMadeAClusterMember(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "nats")
	opts := broker.Options{User: "wo", Password: "secret", NoSync: true}
	single, err := broker.Open(ctx, natsjs.EmbeddedURL(dir), opts)
	if err != nil {
		t.Fatal(err)
	}
	_ = single.Close()
	port := natsjstest.FreeAddrs(t, 1)[0]
	member, err := broker.Open(ctx, natsjs.EmbeddedURL(dir)+"?cluster=wo&cluster_listen="+port, opts)
	if err == nil {
		_ = member.Close()
		t.Fatal("a single server's directory became a cluster member's")
	}
	if !strings.Contains(err.Error(), "single server's data") || !strings.Contains(err.Error(), "new directory") {
		t.Errorf("error %q; want it to say why and what to do", err)
	}
}

var tries int

// tryOnce publishes a fresh job through via and runs it through through, each step bounded.
func tryOnce(ctx context.Context, via, through *broker.Backend) error {
	tries++
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	id := fmt.Sprint("after-", tries)
	tid := tenant.ID{Project: "p", User: id}
	if err := via.Inbox.Publish(ctx, broker.Job{ID: id, Tenant: tid, Payload: []byte(`"x"`), AcceptedAt: time.Now()}); err != nil {
		return err
	}
	q, err := through.Inbox.Open(ctx, tid, broker.QueueOptions{})
	if err != nil {
		return err
	}
	defer func() { _ = q.Close(ctx) }()
	d, err := q.Next(ctx, 5*time.Second)
	if err != nil {
		return err
	}
	return d.Ack(ctx)
}

func TestEmbeddedClusterURLsSayWhatIsMissing(t *testing.T) {
	t.Parallel()
	dir := natsjs.EmbeddedURL(filepath.Join(t.TempDir(), "nats"))
	for url, want := range map[string]string{
		dir + "?cluster=wo":                                             "needs cluster_listen",
		dir + "?cluster_listen=127.0.0.1:6222":                          "need cluster=NAME",
		dir + "?cluster=w%20o&cluster_listen=127.0.0.1:6222":            "use letters, digits",
		dir + "?replicas=3":                                             "needs a cluster",
		dir + "?cluster=wo&cluster_listen=127.0.0.1:6222&routes=nohost": "cluster route",
	} {
		b, err := broker.Open(context.Background(), url, broker.Options{User: "u", Password: "p", NoSync: true})
		if err == nil {
			_ = b.Close()
			t.Errorf("%s: opened", url)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want it to say %q", url, err, want)
		}
	}
	if _, err := broker.Open(context.Background(), dir+"?cluster=wo&cluster_listen=127.0.0.1:6222", broker.Options{NoSync: true}); err == nil ||
		!strings.Contains(err.Error(), "the same on every member") {
		t.Errorf("a member without credentials: %v", err)
	}
}
