package awsq_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/awsq"
	"github.com/webordinary/webordinary/internal/broker/awsq/awsqtest"
	"github.com/webordinary/webordinary/internal/tenant"
)

var alice = tenant.ID{Project: "site-a", User: "alice"}

// setup returns a context bounded for one test and the configuration of a fresh backend.
func setup(t *testing.T, cfg awsq.Config) (context.Context, awsq.Config) {
	t.Helper()
	t.Parallel()
	cfg = awsqtest.Config(t, awsqtest.Options{Config: cfg})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx, cfg
}

func newJob(t tenant.ID, n int) broker.Job {
	return broker.Job{ID: broker.NewJobID(), Tenant: t, Thread: "thread-1", Payload: []byte(fmt.Sprintf(`"job %d"`, n)), AcceptedAt: time.Now().UTC()}
}

func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: expected no error, got %v", what, err)
	}
}

func open(t *testing.T, ctx context.Context, b *broker.Backend, tn tenant.ID, ackWait time.Duration) broker.Queue {
	t.Helper()
	q, err := b.Inbox.Open(ctx, tn, broker.QueueOptions{AckWait: ackWait})
	must(t, err, "open "+tn.String())
	t.Cleanup(func() { _ = q.Close(context.Background()) })
	return q
}

func next(t *testing.T, ctx context.Context, q broker.Queue, want broker.Job, within time.Duration) broker.Delivery {
	t.Helper()
	d, err := q.Next(ctx, within)
	must(t, err, "next, expecting "+string(want.Payload))
	if d.Job().ID != want.ID {
		t.Fatalf("expected %s next, got %s", want.ID, d.Job().ID)
	}
	return d
}

func pendingIs(t *testing.T, ctx context.Context, b *broker.Backend, tn tenant.ID, want int) {
	t.Helper()
	got, err := b.Inbox.Pending(ctx, tn)
	must(t, err, "pending")
	if got != want {
		t.Fatalf("expected %d pending for %s, got %d", want, tn, got)
	}
}

// TestCancelledReceivesLoseNothing: a caller that gives up on a receive (its long poll still
// outstanding server-side) leaves nothing invisible: what is sent right after comes at once,
// although every visibility timeout here is 30 s.
func TestCancelledReceivesLoseNothing(t *testing.T) {
	ctx, cfg := setup(t, awsq.Config{ClaimAckWait: 30 * time.Second, PollWait: 5 * time.Second})
	b := awsqtest.Open(t, cfg)
	const soon = 2 * time.Second
	t.Run("Queue.Next", func(t *testing.T) {
		q := open(t, ctx, b, alice, 30*time.Second)
		_, err := q.Next(ctx, 100*time.Millisecond)
		if !errors.Is(err, broker.ErrNoMessage) {
			t.Fatalf("expected ErrNoMessage, got %v", err)
		}
		cancelled, cancel := context.WithCancel(ctx)
		time.AfterFunc(100*time.Millisecond, cancel)
		if _, err := q.Next(cancelled, time.Minute); err != context.Canceled {
			t.Fatalf("expected context.Canceled, got %v", err)
		}
		job := newJob(alice, 1)
		must(t, b.Inbox.Publish(ctx, job), "publish")
		must(t, next(t, ctx, q, job, soon).Ack(ctx), "ack")
	})
	t.Run("Claims.Next", func(t *testing.T) {
		gaveUp, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if _, err := b.Claims.Next(gaveUp); err != context.DeadlineExceeded {
			t.Fatalf("expected context.DeadlineExceeded, got %v", err)
		}
		must(t, b.Claims.Request(ctx, alice, time.Now()), "request a claim")
		within, cancel2 := context.WithTimeout(ctx, soon)
		defer cancel2()
		c, err := b.Claims.Next(within)
		must(t, err, "the claim requested after a cancelled receive")
		must(t, c.Ack(ctx), "ack the claim")
	})
	t.Run("Results.Next", func(t *testing.T) {
		gaveUp, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if _, err := b.Results.Next(gaveUp); err != context.DeadlineExceeded {
			t.Fatalf("expected context.DeadlineExceeded, got %v", err)
		}
		must(t, b.Results.Publish(ctx, broker.Result{JobID: broker.NewJobID(), Tenant: alice, State: broker.StateDone}), "publish a result")
		within, cancel2 := context.WithTimeout(ctx, soon)
		defer cancel2()
		d, err := b.Results.Next(within)
		must(t, err, "the result published after a cancelled receive")
		must(t, d.Ack(ctx), "ack the result")
	})
}

// TestZombieAckIsRefused: after a new owner opened the tenant, the old owner's Ack fails with
// ErrLeaseLost (SQS alone would accept its stale handle silently), and the job stays the new
// owner's.
func TestZombieAckIsRefused(t *testing.T) {
	ctx, cfg := setup(t, awsq.Config{})
	b := awsqtest.Open(t, cfg)
	job := newJob(alice, 1)
	must(t, b.Inbox.Publish(ctx, job), "publish")
	zombie := next(t, ctx, open(t, ctx, b, alice, 30*time.Second), job, 5*time.Second)
	owner := next(t, ctx, open(t, ctx, b, alice, 30*time.Second), job, 5*time.Second)
	if err := zombie.Ack(ctx); !errors.Is(err, broker.ErrLeaseLost) {
		t.Fatalf("expected the zombie's ack to fail with ErrLeaseLost, got %v", err)
	}
	if err := zombie.Retry(ctx, 0); !errors.Is(err, broker.ErrLeaseLost) {
		t.Fatalf("expected the zombie's retry to fail with ErrLeaseLost, got %v", err)
	}
	pendingIs(t, ctx, b, alice, 1)
	must(t, owner.Ack(ctx), "the owner's ack")
	pendingIs(t, ctx, b, alice, 0)
}

// faultAt returns a fault hook that fails once at point.
func faultAt(point string) (func(string) error, *atomic.Bool) {
	var fired atomic.Bool
	return func(p string) error {
		if p == point && fired.CompareAndSwap(false, true) {
			return errors.New("injected crash at " + p)
		}
		return nil
	}, &fired
}

// TestCrashInPublishLeavesNoPhantom: a publish that dies between sending and counting leaves a
// message the ledger does not count (never a count without a message); Tenants' sweep finds it
// and its owner counts it again on delivery.
func TestCrashInPublishLeavesNoPhantom(t *testing.T) {
	hook, fired := faultAt(awsq.FaultPublishSent)
	ctx, cfg := setup(t, awsq.Config{SweepAfter: time.Second})
	b := awsqtest.Open(t, awsq.WithFaults(cfg, hook))
	job := newJob(alice, 1)
	if err := b.Inbox.Publish(ctx, job); err == nil || !fired.Load() {
		t.Fatalf("expected the injected crash to fail the publish, got %v", err)
	}
	pendingIs(t, ctx, b, alice, 0)
	eventually(t, 5*time.Second, func() error {
		ts, err := b.Inbox.Tenants(ctx)
		if err != nil || ts[alice] != 1 {
			return fmt.Errorf("expected the sweep to report %s with 1 message, got %v, %v", alice, ts, err)
		}
		return nil
	})
	d := next(t, ctx, open(t, ctx, b, alice, 30*time.Second), job, 5*time.Second)
	pendingIs(t, ctx, b, alice, 1)
	must(t, d.Ack(ctx), "ack")
	pendingIs(t, ctx, b, alice, 0)
	eventually(t, 5*time.Second, func() error {
		ts, err := b.Inbox.Tenants(ctx)
		if err != nil || len(ts) != 0 {
			return fmt.Errorf("expected no tenants with work, got %v, %v", ts, err)
		}
		return nil
	})
}

// TestCrashInAckLeavesNoPhantom: an ack that dies between uncounting and deleting leaves the
// message uncounted in SQS; it comes back after its AckWait and is counted and acked then.
func TestCrashInAckLeavesNoPhantom(t *testing.T) {
	hook, fired := faultAt(awsq.FaultAckUncounted)
	ctx, cfg := setup(t, awsq.Config{})
	b := awsqtest.Open(t, awsq.WithFaults(cfg, hook))
	job := newJob(alice, 1)
	must(t, b.Inbox.Publish(ctx, job), "publish")
	q := open(t, ctx, b, alice, time.Second)
	if err := next(t, ctx, q, job, 5*time.Second).Ack(ctx); err == nil || !fired.Load() {
		t.Fatalf("expected the injected crash to fail the ack, got %v", err)
	}
	pendingIs(t, ctx, b, alice, 0)
	d := next(t, ctx, q, job, 5*time.Second)
	pendingIs(t, ctx, b, alice, 1)
	must(t, d.Ack(ctx), "ack the redelivery")
	pendingIs(t, ctx, b, alice, 0)
	if d, err := q.Next(ctx, 2*time.Second); err == nil {
		t.Fatalf("expected nothing after the ack, got %s", d.Job().ID)
	}
}

// TestDeletedQueueIsRecreated: a tenant queue deleted under the adapter (by an operator, or by
// AWS after 30 idle days) is created again by the next publish.
func TestDeletedQueueIsRecreated(t *testing.T) {
	ctx, cfg := setup(t, awsq.Config{})
	b := awsqtest.Open(t, cfg)
	first := newJob(alice, 1)
	must(t, b.Inbox.Publish(ctx, first), "publish")
	q := open(t, ctx, b, alice, 30*time.Second)
	must(t, next(t, ctx, q, first, 5*time.Second).Ack(ctx), "ack")
	must(t, q.Close(ctx), "close")
	raw := awsqtest.ClientsOf(cfg).SQS
	url, err := raw.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(awsq.QueueName(cfg.Prefix, alice))})
	must(t, err, "queue url")
	_, err = raw.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: url.QueueUrl})
	must(t, err, "delete the queue")
	second := newJob(alice, 2)
	must(t, b.Inbox.Publish(ctx, second), "publish after the queue was deleted")
	must(t, next(t, ctx, open(t, ctx, b, alice, 30*time.Second), second, 5*time.Second).Ack(ctx), "ack")
}

// TestLongTenantNameRoundTrips: tenant parts of 63 characters make a queue name over SQS's 80;
// the hashed name is valid and everything round-trips.
func TestLongTenantNameRoundTrips(t *testing.T) {
	ctx, cfg := setup(t, awsq.Config{})
	b := awsqtest.Open(t, cfg)
	long := tenant.ID{Project: "p" + strings.Repeat("x", 62), User: "u" + strings.Repeat("y", 62)}
	other := tenant.ID{Project: long.Project, User: "u" + strings.Repeat("y", 61) + "z"}
	name := awsq.QueueName(cfg.Prefix, long)
	if len(name) > 80 || name == awsq.QueueName(cfg.Prefix, other) {
		t.Fatalf("expected distinct queue names of at most 80 characters, got %q (%d)", name, len(name))
	}
	jobs := map[tenant.ID]broker.Job{long: newJob(long, 1), other: newJob(other, 2)}
	for _, j := range jobs {
		must(t, b.Inbox.Publish(ctx, j), "publish")
	}
	ts, err := b.Inbox.Tenants(ctx)
	must(t, err, "tenants")
	if ts[long] != 1 || ts[other] != 1 || len(ts) != 2 {
		t.Fatalf("expected both long tenants with 1 job, got %v", ts)
	}
	for tn, j := range jobs {
		must(t, next(t, ctx, open(t, ctx, b, tn, 30*time.Second), j, 5*time.Second).Ack(ctx), "ack")
	}
}

// TestLargeJobGoesThroughS3: a job over the SQS limit travels as an S3 object that is deleted
// with the ack.
func TestLargeJobGoesThroughS3(t *testing.T) {
	ctx, cfg := setup(t, awsq.Config{})
	b := awsqtest.Open(t, cfg)
	job := newJob(alice, 1)
	data := []byte(`"` + strings.Repeat("photo", 400*1024) + `"`) // 2 MB
	job.Bulk = data
	must(t, b.Inbox.Publish(ctx, job), "publish a 2 MB job")
	raw := awsqtest.ClientsOf(cfg).S3
	objects := func() int {
		out, err := raw.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(cfg.Prefix + "-payloads")})
		must(t, err, "list payloads")
		return len(out.Contents)
	}
	if n := objects(); n != 1 {
		t.Fatalf("expected the job's payload in S3, got %d objects", n)
	}
	d := next(t, ctx, open(t, ctx, b, alice, 30*time.Second), job, 5*time.Second)
	if got := d.Job().Bulk; !bytes.Equal(got, data) {
		t.Fatalf("expected the 2 MB bulk back intact")
	}
	must(t, d.Ack(ctx), "ack")
	if n := objects(); n != 0 {
		t.Fatalf("expected the payload deleted with the ack, got %d objects", n)
	}
}

// eventually polls cond until it returns nil or within passes.
func eventually(t *testing.T, within time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func mustTenant(t *testing.T, project string) tenant.ID {
	t.Helper()
	tn, err := tenant.New(project, "alice")
	must(t, err, "tenant")
	return tn
}

// TestRepublishAfterAckIsPruned: a job id published again after its ack, inside SQS's
// de-duplication window, is dropped by SQS but counted by the ledger; the owner's next empty
// long poll removes that phantom, so it cannot make claims loop.
func TestRepublishAfterAckIsPruned(t *testing.T) {
	ctx, cfg := setup(t, awsq.Config{})
	b := awsqtest.Open(t, cfg)
	job := newJob(alice, 1)
	must(t, b.Inbox.Publish(ctx, job), "publish")
	q := open(t, ctx, b, alice, 30*time.Second)
	must(t, next(t, ctx, q, job, 5*time.Second).Ack(ctx), "ack")
	must(t, b.Inbox.Publish(ctx, job), "publish the acknowledged job again")
	if d, err := q.Next(ctx, 3*cfg.PollWait); err == nil {
		t.Fatalf("expected SQS to drop the republished job, got %s", d.Job().ID)
	}
	eventually(t, 2*cfg.PollWait+5*time.Second, func() error {
		if n, err := b.Inbox.Pending(ctx, alice); err != nil || n != 0 {
			return fmt.Errorf("expected the phantom pruned (0 pending), got %d, %v", n, err)
		}
		return nil
	})
}
