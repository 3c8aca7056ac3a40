package brokertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
)

func jobContracts() []contract {
	return []contract{
		{"CreateAndGet", testJobsCreateGet},
		{"ConcurrentUpdates", testJobsConcurrentUpdates},
		{"UpdateErrorAborts", testJobsUpdateAborts},
		{"UpdateSeesOtherProcessesWrites", testJobsUpdateSeesPeers},
		{"RecentNewestFirst", testJobsRecent},
		{"RecentDespiteManyUpdates", testJobsRecentAfterUpdates},
		{"WaitForFinalState", testJobsWait},
		{"OlderIDForm", testJobsOlderIDForm},
	}
}

// testJobsCreateGet: Get returns what Create stored; a taken id is ErrExists and an unknown
// one ErrNotFound.
func testJobsCreateGet(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	rec := newRecord(tenantA, 1)
	rec.Worker, rec.LeaseToken = "worker-1", 7
	fatalIfErr(t, b.Jobs.Create(ctx, rec), "create")
	expectRecord(t, ctx, b.Jobs, rec)
	expectErr(t, b.Jobs.Create(ctx, newRecordWithID(rec.Job.ID)), broker.ErrExists, "create a taken id")
	expectRecord(t, ctx, b.Jobs, rec)
	_, err := b.Jobs.Get(ctx, broker.NewJobID())
	expectErr(t, err, broker.ErrNotFound, "get an unknown id")
}

func newRecordWithID(id string) broker.JobRecord {
	rec := newRecord(tenantB, 2)
	rec.Job.ID = id
	return rec
}

// testJobsConcurrentUpdates: concurrent Updates each apply once: ten increments end at ten,
// and each caller sees a different count.
func testJobsConcurrentUpdates(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	rec := newRecord(tenantA, 1)
	fatalIfErr(t, b.Jobs.Create(ctx, rec), "create")
	const n = 10
	seen := incrementConcurrently(t, ctx, b.Jobs, rec.Job.ID, n)
	slices.Sort(seen)
	if want := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}; !slices.Equal(seen, want) {
		t.Errorf("expected the updaters to see attempts %v, got %v", want, seen)
	}
	got, err := b.Jobs.Get(ctx, rec.Job.ID)
	fatalIfErr(t, err, "get")
	if got.Attempts != n {
		t.Errorf("expected %d attempts after %d concurrent increments, got %d", n, n, got.Attempts)
	}
}

// incrementConcurrently runs n Updates of id at once, each adding one attempt, and returns
// the attempts each stored record had.
func incrementConcurrently(t *testing.T, ctx context.Context, jobs broker.Jobs, id string, n int) []int {
	t.Helper()
	seen := make([]int, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			rec, err := jobs.Update(ctx, id, func(r *broker.JobRecord) error { r.Attempts++; return nil })
			seen[i], errs[i] = rec.Attempts, err
		})
	}
	close(start)
	wg.Wait()
	fatalIfErr(t, errors.Join(errs...), "concurrent update")
	return seen
}

// testJobsUpdateAborts: an error from fn aborts the Update, is returned, and stores nothing.
func testJobsUpdateAborts(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	rec := newRecord(tenantA, 1)
	fatalIfErr(t, b.Jobs.Create(ctx, rec), "create")
	errStop := errors.New("stop here")
	got, err := b.Jobs.Update(ctx, rec.Job.ID, func(r *broker.JobRecord) error {
		r.State = broker.StateDone
		return errStop
	})
	expectErr(t, err, errStop, "update whose fn fails")
	if got.Job.ID != rec.Job.ID {
		t.Errorf("an aborted update returned the record of %q; want the record fn saw (%s), which callers use to say why", got.Job.ID, rec.Job.ID)
	}
	expectRecord(t, ctx, b.Jobs, rec)
}

// testJobsUpdateSeesPeers: after process A updated a record and process B updated it too,
// A's next Update applies fn to B's version (a client may remember its own writes, never
// judge by them): fn would refuse A's own version, and must not be refused by it.
func testJobsUpdateSeesPeers(t *testing.T, h Harness) {
	ctx, a, b := h.peers(t)
	rec := newRecord(tenantA, 1)
	fatalIfErr(t, a.Jobs.Create(ctx, rec), "create")
	id := rec.Job.ID
	_, err := a.Jobs.Update(ctx, id, func(r *broker.JobRecord) error { r.State = broker.StateRunning; return nil })
	fatalIfErr(t, err, "A marks it running")
	_, err = b.Jobs.Update(ctx, id, func(r *broker.JobRecord) error { r.State, r.LastError = broker.StateQueued, "B"; return nil })
	fatalIfErr(t, err, "B hands it back")
	errRunning := errors.New("still running")
	got, err := a.Jobs.Update(ctx, id, func(r *broker.JobRecord) error {
		if r.State == broker.StateRunning { // true only of A's own, older version
			return errRunning
		}
		r.State = broker.StateDone
		return nil
	})
	if err != nil || got.State != broker.StateDone || got.LastError != "B" {
		t.Fatalf("A's update after B's stored state %s, last error %q (err %v); want fn applied to B's record: done, \"B\"", got.State, got.LastError, err)
	}
	_, err = b.Jobs.Update(ctx, id, func(r *broker.JobRecord) error { r.Attempts = 5; return nil })
	fatalIfErr(t, err, "B updates again")
	got, err = a.Jobs.Update(ctx, id, func(r *broker.JobRecord) error { r.LastError += "+A"; return nil })
	fatalIfErr(t, err, "A appends")
	if got.Attempts != 5 || got.LastError != "B+A" {
		t.Fatalf("A's update stored attempts %d, last error %q; want 5 and %q (B's writes kept)", got.Attempts, got.LastError, "B+A")
	}
	expectRecord(t, ctx, b.Jobs, got)
}

// testJobsRecent: Recent returns at most n records, newest first.
func testJobsRecent(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	var ids []string
	for i := range 5 {
		rec := newRecord(tenantA, i)
		fatalIfErr(t, b.Jobs.Create(ctx, rec), "create")
		ids = append(ids, rec.Job.ID)
	}
	slices.Reverse(ids)
	expectRecent(t, ctx, b.Jobs, 3, ids[:3])
	expectRecent(t, ctx, b.Jobs, 10, ids)
}

// testJobsRecentAfterUpdates: records written many times since do not hide newer ones.
func testJobsRecentAfterUpdates(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	var ids []string
	for i := range 5 {
		rec := newRecord(tenantA, i)
		fatalIfErr(t, b.Jobs.Create(ctx, rec), "create")
		ids = append(ids, rec.Job.ID)
	}
	for range 30 {
		_, err := b.Jobs.Update(ctx, ids[0], func(r *broker.JobRecord) error { r.Attempts++; return nil })
		fatalIfErr(t, err, "update the oldest record")
	}
	slices.Reverse(ids)
	expectRecent(t, ctx, b.Jobs, 3, ids[:3])
}

func expectRecent(t *testing.T, ctx context.Context, jobs broker.Jobs, n int, want []string) {
	t.Helper()
	recs, err := jobs.Recent(ctx, n)
	fatalIfErr(t, err, fmt.Sprintf("recent %d", n))
	got := make([]string, len(recs))
	for i, r := range recs {
		got[i] = r.Job.ID
	}
	if !slices.Equal(got, want) {
		t.Errorf("recent %d: expected ids newest first %v, got %v", n, want, got)
	}
}

// testJobsWait: Wait blocks while the condition is false, ending with ctx, and returns the
// record once another goroutine's Update makes it true.
func testJobsWait(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	rec := newRecord(tenantA, 1)
	rec.State = broker.StateRunning
	fatalIfErr(t, b.Jobs.Create(ctx, rec), "create")
	final := func(r broker.JobRecord) bool { return r.State.Final() }
	_, err := b.Jobs.Wait(withTimeout(t, ctx, emptyWait), rec.Job.ID, final)
	expectErr(t, err, context.DeadlineExceeded, "wait for a state that does not come")
	waited := waitInBackground(ctx, b.Jobs, rec.Job.ID, final)
	finish(t, ctx, b.Jobs, rec.Job.ID)
	got := <-waited
	fatalIfErr(t, got.err, "wait for a final state")
	if got.rec.State != broker.StateDone || got.rec.Attempts != 1 {
		t.Errorf("expected wait to return the done record with 1 attempt, got %+v", got.rec)
	}
}

type waitResult struct {
	rec broker.JobRecord
	err error
}

func waitInBackground(ctx context.Context, jobs broker.Jobs, id string, until func(broker.JobRecord) bool) <-chan waitResult {
	out := make(chan waitResult, 1)
	go func() {
		rec, err := jobs.Wait(ctx, id, until)
		out <- waitResult{rec, err}
	}()
	return out
}

// finish moves id through a non-final update to done, as a worker would.
func finish(t *testing.T, ctx context.Context, jobs broker.Jobs, id string) {
	t.Helper()
	_, err := jobs.Update(ctx, id, func(r *broker.JobRecord) error { r.Attempts++; return nil })
	fatalIfErr(t, err, "update attempts")
	_, err = jobs.Update(ctx, id, func(r *broker.JobRecord) error { r.State = broker.StateDone; return nil })
	fatalIfErr(t, err, "update to done")
}

func expectRecord(t *testing.T, ctx context.Context, jobs broker.Jobs, want broker.JobRecord) {
	t.Helper()
	got, err := jobs.Get(ctx, want.Job.ID)
	fatalIfErr(t, err, "get "+want.Job.ID)
	if !sameRecord(got, want) {
		t.Errorf("expected record %+v, got %+v", want, got)
	}
}

// testJobsOlderIDForm: a record of a job id of the older form (no tenant group, as accepted
// before ids carried one) is created, read, updated by its lease holder's fenced write,
// waited for and listed like any other; ids that name no record are not found.
func testJobsOlderIDForm(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	rec := newRecord(tenantA, 1)
	rec.Job.ID = broker.NewJobID()
	if _, grouped := broker.JobGroupOf(rec.Job.ID); grouped {
		t.Fatalf("expected %s of the older form", rec.Job.ID)
	}
	fatalIfErr(t, b.Jobs.Create(ctx, rec), "create")
	expectRecord(t, ctx, b.Jobs, rec)
	l := mustAcquire(t, ctx, b.Leases, tenantA, "worker-a", longTTL)
	got, err := broker.NewFence(b, l).UpdateJob(ctx, rec.Job.ID, markDone("worker-a", l.Token))
	fatalIfErr(t, err, "the holder's write")
	if got.State != broker.StateDone || got.LeaseToken != l.Token {
		t.Errorf("expected the holder's write stored, got %+v", got)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = b.Jobs.Wait(wctx, rec.Job.ID, func(r broker.JobRecord) bool { return r.State.Final() })
	fatalIfErr(t, err, "wait for the final record")
	recent, err := b.Jobs.Recent(ctx, 10)
	fatalIfErr(t, err, "recent")
	if len(recent) != 1 || recent[0].Job.ID != rec.Job.ID {
		t.Errorf("expected the record listed, got %d records", len(recent))
	}
	for _, id := range []string{"_fence", "a.b", "j*", rec.Job.ID + "0000"} {
		_, err := b.Jobs.Get(ctx, id)
		expectErr(t, err, broker.ErrNotFound, "get "+id)
	}
}
