package brokertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

func inboxContracts() []contract {
	return []contract{
		{"FIFOPerTenant", testFIFOPerTenant},
		{"PublishIsIdempotent", testPublishIdempotent},
		{"PendingAndTenants", testPendingAndTenants},
		{"NextOnEmptyQueue", testNextOnEmpty},
		{"NextWithoutWait", testNextWithoutWait},
		{"OpenQueueSeesLaterPublish", testOpenSeesLaterPublish},
		{"OneDeliveryAtATime", testOneAtATime},
		{"RedeliveryAfterCrash", testRedeliveryAfterCrash},
		{"RedeliveryAfterAckWait", testRedeliveryAfterAckWait},
		{"ExtendHoldsDelivery", testExtendHoldsDelivery},
		{"RetryIsFirstInLine", testRetryFirstInLine},
		{"RetryWaitsDelay", testRetryWaitsDelay},
		{"DeadLetterAfterAttempts", testDeadLetter},
		{"CloseThenReopen", testCloseThenReopen},
	}
}

// testFIFOPerTenant: each tenant's jobs arrive in publish order, whatever was published to
// other tenants in between.
func testFIFOPerTenant(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	var jobsA, jobsB []broker.Job
	for i := range 50 {
		jobsA = append(jobsA, newJob(tenantA, i))
		jobsB = append(jobsB, newJob(tenantB, i))
		publish(t, ctx, b.Inbox, jobsA[i], jobsB[i])
	}
	consumeInOrder(t, ctx, b.Inbox, tenantA, jobsA)
	consumeInOrder(t, ctx, b.Inbox, tenantB, jobsB)
}

// consumeInOrder opens tn's queue and expects exactly want, in order, each on its first attempt.
func consumeInOrder(t *testing.T, ctx context.Context, inbox broker.Inbox, tn tenant.ID, want []broker.Job) {
	t.Helper()
	q := openQueue(t, ctx, inbox, tn, longTTL)
	for _, job := range want {
		ack(t, ctx, expectNext(t, ctx, q, job, 1))
	}
	expectNothing(t, ctx, q)
}

// testPublishIdempotent: publishing the same job id twice queues it once.
func testPublishIdempotent(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	job := newJob(tenantA, 1)
	publish(t, ctx, b.Inbox, job, job)
	expectPending(t, ctx, b.Inbox, tenantA, 1)
	q := openQueue(t, ctx, b.Inbox, tenantA, longTTL)
	ack(t, ctx, expectNext(t, ctx, q, job, 1))
	expectNothing(t, ctx, q)
}

// testPendingAndTenants: Pending counts waiting and in-flight messages, and drops on Ack by
// the queue's Close at the latest, or soon after its Next finds nothing (a backend may remove
// acknowledged messages together); Tenants lists exactly the tenants with pending messages.
func testPendingAndTenants(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	expectTenants(t, ctx, b.Inbox, map[tenant.ID]int{})
	jobsA := publishN(t, ctx, b.Inbox, tenantA, 3)
	publishN(t, ctx, b.Inbox, tenantB, 2)
	expectPending(t, ctx, b.Inbox, tenantA, 3)
	expectPending(t, ctx, b.Inbox, tenantB, 2)
	expectPending(t, ctx, b.Inbox, tenantC, 0)
	expectTenants(t, ctx, b.Inbox, map[tenant.ID]int{tenantA: 3, tenantB: 2})
	q := openQueue(t, ctx, b.Inbox, tenantA, longTTL)
	d := expectNext(t, ctx, q, jobsA[0], 1)
	expectPending(t, ctx, b.Inbox, tenantA, 3) // one in flight still counts
	ack(t, ctx, d)
	fatalIfErr(t, q.Close(ctx), "close")
	expectPending(t, ctx, b.Inbox, tenantA, 2) // Close has removed what was acknowledged
	q = openQueue(t, ctx, b.Inbox, tenantA, longTTL)
	for _, job := range jobsA[1:] {
		ack(t, ctx, expectNext(t, ctx, q, job, 1))
	}
	expectNothing(t, ctx, q)
	eventuallyTenants(t, ctx, b.Inbox, map[tenant.ID]int{tenantB: 2})
}

// testNextOnEmpty: Next on an empty queue returns ErrNoMessage after about its wait.
func testNextOnEmpty(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	q := openQueue(t, ctx, b.Inbox, tenantA, longTTL)
	const wait = time.Second
	start := time.Now()
	_, err := q.Next(ctx, wait)
	elapsed := time.Since(start)
	expectErr(t, err, broker.ErrNoMessage, "next on an empty queue")
	if elapsed > wait+time.Second {
		t.Errorf("expected next to give up within about %v, took %v", wait, elapsed)
	}
}

// testNextWithoutWait: Next with a zero wait on an empty queue returns ErrNoMessage at once.
func testNextWithoutWait(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	q := openQueue(t, ctx, b.Inbox, tenantA, longTTL)
	start := time.Now()
	_, err := q.Next(ctx, 0)
	expectErr(t, err, broker.ErrNoMessage, "next with a zero wait on an empty queue")
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("expected next with a zero wait to return at once, took %v", elapsed)
	}
}

// testOpenSeesLaterPublish: an open queue delivers a job published after it was opened.
func testOpenSeesLaterPublish(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	q := openQueue(t, ctx, b.Inbox, tenantA, longTTL)
	job := newJob(tenantA, 1)
	publish(t, ctx, b.Inbox, job)
	ack(t, ctx, expectNext(t, ctx, q, job, 1))
}

// testOneAtATime: while a delivery is unsettled, Next delivers nothing newer.
func testOneAtATime(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	jobs := publishN(t, ctx, b.Inbox, tenantA, 2)
	q := openQueue(t, ctx, b.Inbox, tenantA, longTTL)
	first := expectNext(t, ctx, q, jobs[0], 1)
	expectNothing(t, ctx, q)
	ack(t, ctx, first)
	ack(t, ctx, expectNext(t, ctx, q, jobs[1], 1))
}

// testRedeliveryAfterCrash: a delivery left unsettled by an owner that vanished without
// closing its queue comes first, at once, to the next Open; order continues after it.
func testRedeliveryAfterCrash(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	jobs := publishN(t, ctx, b.Inbox, tenantA, 3)
	crashed := openAbandoned(t, ctx, b.Inbox, tenantA)
	expectNext(t, ctx, crashed, jobs[0], 1)
	q := openQueue(t, ctx, b.Inbox, tenantA, longTTL)
	for _, job := range jobs {
		ack(t, ctx, expectNext(t, ctx, q, job, 0))
	}
	expectNothing(t, ctx, q)
}

// testRedeliveryAfterAckWait: an unsettled delivery comes again, attempt 2, once AckWait has
// passed, and not before.
func testRedeliveryAfterAckWait(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	jobs := publishN(t, ctx, b.Inbox, tenantA, 2)
	q := openQueue(t, ctx, b.Inbox, tenantA, shortAckWait)
	start := time.Now()
	expectNext(t, ctx, q, jobs[0], 1)
	again := expectNextWithin(t, ctx, q, jobs[0], 2, shortAckWait+deliverWithin)
	if elapsed := time.Since(start); elapsed < shortAckWait-100*time.Millisecond {
		t.Errorf("expected the redelivery to wait out AckWait %v, came after %v", shortAckWait, elapsed)
	}
	ack(t, ctx, again)
	ack(t, ctx, expectNext(t, ctx, q, jobs[1], 1))
}

// testExtendHoldsDelivery: a delivery extended more often than its AckWait is not delivered
// again, however long it runs.
func testExtendHoldsDelivery(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	jobs := publishN(t, ctx, b.Inbox, tenantA, 2)
	ackWait := 2 * shortAckWait // room for a loaded machine between extensions
	q := openQueue(t, ctx, b.Inbox, tenantA, ackWait)
	d := expectNext(t, ctx, q, jobs[0], 1)
	for end := time.Now().Add(3 * ackWait); time.Now().Before(end); {
		fatalIfErr(t, d.Extend(ctx), "extend")
		expectNothingWithin(t, ctx, q, ackWait/4)
	}
	ack(t, ctx, d)
	ack(t, ctx, expectNext(t, ctx, q, jobs[1], 1))
}

// testRetryFirstInLine: a retried message comes again before the next one, its attempt counted.
func testRetryFirstInLine(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	jobs := publishN(t, ctx, b.Inbox, tenantA, 2)
	q := openQueue(t, ctx, b.Inbox, tenantA, longTTL)
	for attempt := 1; attempt < 3; attempt++ {
		d := expectNext(t, ctx, q, jobs[0], attempt)
		fatalIfErr(t, d.Retry(ctx, 0), "retry")
	}
	ack(t, ctx, expectNext(t, ctx, q, jobs[0], 3))
	ack(t, ctx, expectNext(t, ctx, q, jobs[1], 1))
}

// testRetryWaitsDelay: a message retried with a delay is not delivered before about the delay,
// and nothing behind it overtakes it meanwhile.
func testRetryWaitsDelay(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	jobs := publishN(t, ctx, b.Inbox, tenantA, 2)
	q := openQueue(t, ctx, b.Inbox, tenantA, longTTL)
	const delay = time.Second
	d := expectNext(t, ctx, q, jobs[0], 1)
	start := time.Now()
	fatalIfErr(t, d.Retry(ctx, delay), "retry with delay")
	expectNothingWithin(t, ctx, q, delay/2)
	again := expectNextWithin(t, ctx, q, jobs[0], 2, delay+deliverWithin)
	if elapsed := time.Since(start); elapsed < delay-100*time.Millisecond {
		t.Errorf("expected the retry to wait about %v, came after %v", delay, elapsed)
	}
	ack(t, ctx, again)
	ack(t, ctx, expectNext(t, ctx, q, jobs[1], 1))
}

// testDeadLetter: after three attempts a message is dead-lettered: it leaves the queue, the
// next message follows, and DeadLetters lists it intact with the reason.
func testDeadLetter(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	jobs := publishN(t, ctx, b.Inbox, tenantA, 2)
	q := openQueue(t, ctx, b.Inbox, tenantA, longTTL)
	d := retryUntilAttempt(t, ctx, q, jobs[0], 3)
	const reason = "failed 3 times: build error"
	fatalIfErr(t, d.DeadLetter(ctx, reason), "dead-letter")
	expectDeadLetters(t, ctx, b.Inbox, tenantA, reason, jobs[0])
	next := expectNext(t, ctx, q, jobs[1], 1)
	ack(t, ctx, next)
	expectNothing(t, ctx, q)
	eventuallyTenants(t, ctx, b.Inbox, map[tenant.ID]int{})
	expectDeadLetters(t, ctx, b.Inbox, tenantB, reason)
	for range 2 { // removing is idempotent
		fatalIfErr(t, b.Inbox.RemoveDeadLetter(ctx, tenantA, jobs[0].ID), "remove dead letter")
	}
	expectDeadLetters(t, ctx, b.Inbox, tenantA, reason)
}

// retryUntilAttempt retries job until it is delivered for the attempt-th time, and returns
// that delivery.
func retryUntilAttempt(t *testing.T, ctx context.Context, q broker.Queue, job broker.Job, attempt int) broker.Delivery {
	t.Helper()
	d := expectNext(t, ctx, q, job, 1)
	for n := 2; n <= attempt; n++ {
		fatalIfErr(t, d.Retry(ctx, 0), "retry")
		d = expectNext(t, ctx, q, job, n)
	}
	return d
}

// expectDeadLetters checks that tn's dead letters are exactly want, oldest first, with reason.
func expectDeadLetters(t *testing.T, ctx context.Context, inbox broker.Inbox, tn tenant.ID, reason string, want ...broker.Job) {
	t.Helper()
	got, err := inbox.DeadLetters(ctx, tn)
	fatalIfErr(t, err, fmt.Sprintf("dead letters of %s", tn))
	if len(got) != len(want) {
		t.Fatalf("expected %d dead letters for %s, got %d: %+v", len(want), tn, len(got), got)
	}
	for i, dl := range got {
		if !sameJob(dl.Job, want[i]) || dl.Reason != reason || dl.At.IsZero() {
			t.Errorf("expected dead letter %d of %s to be %+v with reason %q and a time, got %+v", i, tn, want[i], reason, dl)
		}
	}
}

// testCloseThenReopen: after Close, the next Open starts at the first unacknowledged
// message; Close is idempotent.
func testCloseThenReopen(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	jobs := publishN(t, ctx, b.Inbox, tenantA, 3)
	q := openQueue(t, ctx, b.Inbox, tenantA, longTTL)
	ack(t, ctx, expectNext(t, ctx, q, jobs[0], 1))
	expectNext(t, ctx, q, jobs[1], 1)
	fatalIfErr(t, q.Close(ctx), "close with a delivery unsettled")
	fatalIfErr(t, q.Close(ctx), "close again")
	reopened := openQueue(t, ctx, b.Inbox, tenantA, longTTL)
	for _, job := range jobs[1:] {
		ack(t, ctx, expectNext(t, ctx, reopened, job, 0))
	}
	expectNothing(t, ctx, reopened)
}

func publish(t *testing.T, ctx context.Context, inbox broker.Inbox, jobs ...broker.Job) {
	t.Helper()
	for _, job := range jobs {
		fatalIfErr(t, inbox.Publish(ctx, job), fmt.Sprintf("publish %s to %s", job.ID, job.Tenant))
	}
}

// publishN publishes n new jobs to tn and returns them in order.
func publishN(t *testing.T, ctx context.Context, inbox broker.Inbox, tn tenant.ID, n int) []broker.Job {
	t.Helper()
	jobs := make([]broker.Job, n)
	for i := range jobs {
		jobs[i] = newJob(tn, i)
		publish(t, ctx, inbox, jobs[i])
	}
	return jobs
}

// openQueue opens tn's queue and closes it when the test ends.
func openQueue(t *testing.T, ctx context.Context, inbox broker.Inbox, tn tenant.ID, ackWait time.Duration) broker.Queue {
	t.Helper()
	q, err := inbox.Open(ctx, tn, broker.QueueOptions{AckWait: ackWait})
	fatalIfErr(t, err, fmt.Sprintf("open %s", tn))
	t.Cleanup(func() {
		ctx, cancel := cleanupContext()
		defer cancel()
		if err := q.Close(ctx); err != nil {
			t.Errorf("close %s: expected no error, got %v", tn, err)
		}
	})
	return q
}

// openAbandoned opens tn's queue for an owner that will crash: the test never closes it. It
// is closed after the test only to free resources, and an error from that is just logged.
func openAbandoned(t *testing.T, ctx context.Context, inbox broker.Inbox, tn tenant.ID) broker.Queue {
	t.Helper()
	q, err := inbox.Open(ctx, tn, broker.QueueOptions{AckWait: longTTL})
	fatalIfErr(t, err, fmt.Sprintf("open %s", tn))
	t.Cleanup(func() {
		ctx, cancel := cleanupContext()
		defer cancel()
		if err := q.Close(ctx); err != nil {
			t.Logf("close the crashed owner's queue of %s: %v", tn, err)
		}
	})
	return q
}

// expectNext expects want as q's next delivery, on the given attempt (0: any).
func expectNext(t *testing.T, ctx context.Context, q broker.Queue, want broker.Job, attempt int) broker.Delivery {
	t.Helper()
	return expectNextWithin(t, ctx, q, want, attempt, deliverWithin)
}

// expectNextWithin expects want as q's next delivery within wait, on the given attempt (0: any).
func expectNextWithin(t *testing.T, ctx context.Context, q broker.Queue, want broker.Job, attempt int, wait time.Duration) broker.Delivery {
	t.Helper()
	d, err := q.Next(ctx, wait)
	fatalIfErr(t, err, fmt.Sprintf("next, expecting %q", label(want)))
	if got := d.Job(); !sameJob(got, want) {
		t.Fatalf("expected %q (%s) next, got %q (%s): %+v", label(want), want.ID, label(got), got.ID, got)
	}
	if attempt != 0 && d.Attempt() != attempt {
		t.Errorf("expected %q on attempt %d, got attempt %d", label(want), attempt, d.Attempt())
	}
	return d
}

// expectNothing expects no delivery from q within emptyWait.
func expectNothing(t *testing.T, ctx context.Context, q broker.Queue) {
	t.Helper()
	expectNothingWithin(t, ctx, q, emptyWait)
}

// expectNothingWithin expects Next to return ErrNoMessage after waiting wait.
func expectNothingWithin(t *testing.T, ctx context.Context, q broker.Queue, wait time.Duration) {
	t.Helper()
	d, err := q.Next(ctx, wait)
	if err == nil {
		job := d.Job()
		t.Fatalf("expected no delivery, got %q (%s) on attempt %d", label(job), job.ID, d.Attempt())
	}
	if !errors.Is(err, broker.ErrNoMessage) {
		t.Fatalf("expected ErrNoMessage, got %v", err)
	}
}

func ack(t *testing.T, ctx context.Context, d broker.Delivery) {
	t.Helper()
	fatalIfErr(t, d.Ack(ctx), fmt.Sprintf("ack %q", label(d.Job())))
}

// expectPending checks tn's pending count now: a published message counts at once.
func expectPending(t *testing.T, ctx context.Context, inbox broker.Inbox, tn tenant.ID, want int) {
	t.Helper()
	if err := pendingIs(ctx, inbox, tn, want); err != nil {
		t.Fatal(err)
	}
}

func pendingIs(ctx context.Context, inbox broker.Inbox, tn tenant.ID, want int) error {
	got, err := inbox.Pending(ctx, tn)
	if err != nil {
		return fmt.Errorf("pending of %s: expected no error, got %w", tn, err)
	}
	if got != want {
		return fmt.Errorf("expected %d pending for %s, got %d", want, tn, got)
	}
	return nil
}

// expectTenants checks the tenants with pending work now.
func expectTenants(t *testing.T, ctx context.Context, inbox broker.Inbox, want map[tenant.ID]int) {
	t.Helper()
	if err := tenantsAre(ctx, inbox, want); err != nil {
		t.Fatal(err)
	}
}

// eventuallyTenants waits for the tenants with pending work to settle at want after an Ack.
func eventuallyTenants(t *testing.T, ctx context.Context, inbox broker.Inbox, want map[tenant.ID]int) {
	t.Helper()
	eventually(t, settleWithin, func() error { return tenantsAre(ctx, inbox, want) })
}

func tenantsAre(ctx context.Context, inbox broker.Inbox, want map[tenant.ID]int) error {
	got, err := inbox.Tenants(ctx)
	if err != nil {
		return fmt.Errorf("tenants: expected no error, got %w", err)
	}
	if !maps.Equal(got, want) {
		return fmt.Errorf("expected tenants with pending work %v, got %v", want, got)
	}
	return nil
}
