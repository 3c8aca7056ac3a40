package natsjs

import (
	"context"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
)

// TestCreatedRevisionTravelsWithTheJob: the process that records and publishes a job tells the
// worker's process the record's revision, so the worker's first update needs no read; a
// write made by anyone in between is never overwritten (the compare-and-set refuses the
// stale revision and the update reads the record), and a record created in another shape
// sends no revision.
func TestCreatedRevisionTravelsWithTheJob(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testServer(t)
	open := func() *broker.Backend {
		return testBackend(t, ctx, testConn(t, srv), Config{})
	}
	router, worker, other := open(), open(), open()
	tn := mustTenant("p", "u")
	submit := func(id string) broker.Job {
		job := broker.Job{ID: id, Tenant: tn, Payload: []byte(`{"subject":"s"}`), AcceptedAt: time.Now()}
		if err := router.Jobs.Create(ctx, broker.QueuedRecord(job)); err != nil {
			t.Fatal(err)
		}
		if err := router.Inbox.Publish(ctx, job); err != nil {
			t.Fatal(err)
		}
		return job
	}
	untouched, touched := submit("j1"), submit("j2")
	if _, err := other.Jobs.Update(ctx, touched.ID, func(r *broker.JobRecord) error {
		r.LastError = "written by another process in between"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	q, err := worker.Inbox.Open(ctx, tn, broker.QueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, job := range []broker.Job{untouched, touched} {
		d, err := q.Next(ctx, 5*time.Second)
		if err != nil || d.Job().ID != job.ID {
			t.Fatalf("next: %v", err)
		}
		h := d.(*delivery).created
		if h == 0 {
			t.Errorf("%s delivered without its record's revision", job.ID)
		}
		if w, ok := worker.Jobs.(*jobs).lastWrite(job.ID); !ok || w.rev != h {
			t.Errorf("%s: the worker's client holds revision %d (%v) for its first update; want the created one, %d", job.ID, w.rev, ok, h)
		}
		rec, err := worker.Jobs.Update(ctx, job.ID, func(r *broker.JobRecord) error {
			r.State, r.Attempts = broker.StateRunning, r.Attempts+1
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got, err := other.Jobs.Get(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != broker.StateRunning || got.Attempts != 1 || string(got.Job.Payload) != `{"subject":"s"}` ||
			got.LastError != rec.LastError {
			t.Errorf("%s stored as %+v", job.ID, got)
		}
		if job.ID == touched.ID && got.LastError == "" {
			t.Errorf("the worker's update overwrote another process's write")
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A record created in another shape: its publish carries no revision.
	job := testJob("j3", tn)
	if err := router.Jobs.Create(ctx, broker.JobRecord{Job: job, State: broker.StateRunning}); err != nil {
		t.Fatal(err)
	}
	if err := router.Inbox.Publish(ctx, job); err != nil {
		t.Fatal(err)
	}
	d, err := q.Next(ctx, 5*time.Second)
	if err != nil || d.Job().ID != job.ID {
		t.Fatalf("next: %v", err)
	}
	if h := d.(*delivery).created; h != 0 {
		t.Errorf("a record not created as queued sent revision %d", h)
	}
}
