package natsjs_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/natsjs/natsjstest"
	"github.com/webordinary/webordinary/internal/tenant"
)

// The cost of fencing on natsjs. A record write: compare BenchmarkJobsUpdate with
// BenchmarkJobsUpdateFenced (an id of the older form: a lease read before the compare-and-set)
// and BenchmarkJobsUpdateFencedInStore (a grouped id: the stream's condition, after the
// holder's own write no read); a job's two writes (running, then final) on a fresh record,
// BenchmarkJobWritesReadFenced against BenchmarkJobWritesFencedInStore (whose first write
// reads the group's view). A settle (its settle mark, a
// conditioned write): BenchmarkSettle with BenchmarkSettleFenced. An acquisition raises the
// tenants' fence keys: BenchmarkAcquire. Sync off: the difference, not the disk, is measured.

func BenchmarkJobsUpdate(b *testing.B) {
	benchUpdate(b, func(b *broker.Backend, _ broker.Lease) func(context.Context, string, func(*broker.JobRecord) error) (broker.JobRecord, error) {
		return b.Jobs.Update
	})
}

func BenchmarkJobsUpdateFenced(b *testing.B) {
	benchUpdate(b, func(b *broker.Backend, l broker.Lease) func(context.Context, string, func(*broker.JobRecord) error) (broker.JobRecord, error) {
		return broker.NewFence(b, l).UpdateJob
	})
}

func BenchmarkJobsUpdateFencedInStore(b *testing.B) {
	benchUpdateOf(b, true, func(b *broker.Backend, l broker.Lease) func(context.Context, string, func(*broker.JobRecord) error) (broker.JobRecord, error) {
		return broker.NewFence(b, l).UpdateJob
	})
}

func BenchmarkJobWritesReadFenced(b *testing.B) { benchJobWrites(b, false) }

func BenchmarkJobWritesFencedInStore(b *testing.B) { benchJobWrites(b, true) }

// benchJobWrites creates a record and writes it twice as its tenant's lease holder, per
// iteration; grouped: with an id in the tenant's group.
func benchJobWrites(b *testing.B, grouped bool) {
	ctx := context.Background()
	be, tn, l := benchHolder(b)
	f := broker.NewFence(be, l)
	for b.Loop() {
		job := broker.Job{ID: benchJobID(b, tn, grouped), Tenant: tn, Payload: json.RawMessage(`{"instruction":"x"}`)}
		if err := be.Jobs.Create(ctx, broker.QueuedRecord(job)); err != nil {
			b.Fatal(err)
		}
		for _, s := range []broker.State{broker.StateRunning, broker.StateDone} {
			if _, err := f.UpdateJob(ctx, job.ID, func(r *broker.JobRecord) error { r.State = s; return nil }); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// benchHolder starts an engine (sync off: the difference, not the disk, is measured) and
// returns its backend, a tenant, and a lease of it held for the benchmark.
func benchHolder(b *testing.B) (*broker.Backend, tenant.ID, broker.Lease) {
	env := natsjstest.Start(b, natsjstest.Options{NoSync: true})
	tn := tenant.ID{Project: "site", User: "alice"}
	l, err := env.Backend.Leases.Acquire(context.Background(), tn, "w1", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	return env.Backend, tn, l
}

func benchJobID(b *testing.B, tn tenant.ID, grouped bool) string {
	if !grouped {
		return broker.NewJobID()
	}
	id, err := broker.JobIDFor(broker.NewJobID(), tn)
	if err != nil {
		b.Fatal(err)
	}
	return id
}

func benchUpdate(b *testing.B, writer func(*broker.Backend, broker.Lease) func(context.Context, string, func(*broker.JobRecord) error) (broker.JobRecord, error)) {
	benchUpdateOf(b, false, writer)
}

func benchUpdateOf(b *testing.B, grouped bool, writer func(*broker.Backend, broker.Lease) func(context.Context, string, func(*broker.JobRecord) error) (broker.JobRecord, error)) {
	ctx := context.Background()
	be, tn, l := benchHolder(b)
	job := broker.Job{ID: benchJobID(b, tn, grouped), Tenant: tn, Payload: json.RawMessage(`{"instruction":"x"}`)}
	if err := be.Jobs.Create(ctx, broker.QueuedRecord(job)); err != nil {
		b.Fatal(err)
	}
	update := writer(be, l)
	for b.Loop() {
		if _, err := update(ctx, job.ID, func(r *broker.JobRecord) error { r.Attempts++; return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSettle(b *testing.B) { benchSettle(b, false) }

func BenchmarkSettleFenced(b *testing.B) { benchSettle(b, true) }

// benchSettle publishes, takes and acknowledges one job per iteration, as the lease holder.
func benchSettle(b *testing.B, fenced bool) {
	ctx := context.Background()
	be, tn, l := benchHolder(b)
	q, err := be.Inbox.Open(ctx, tn, broker.QueueOptions{AckWait: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = q.Close(ctx) }()
	f := broker.NewFence(be, l)
	for b.Loop() {
		job := broker.Job{ID: broker.NewJobID(), Tenant: tn, Payload: json.RawMessage(`{"instruction":"x"}`)}
		if err := be.Inbox.Publish(ctx, job); err != nil {
			b.Fatal(err)
		}
		d, err := q.Next(ctx, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if fenced {
			d = f.Delivery(d)
		}
		if err := d.Ack(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAcquire takes and releases a tenant's lease.
func BenchmarkAcquire(b *testing.B) {
	env := natsjstest.Start(b, natsjstest.Options{NoSync: true})
	ctx := context.Background()
	tn := tenant.ID{Project: "site", User: "alice"}
	for b.Loop() {
		l, err := env.Backend.Leases.Acquire(ctx, tn, "w1", time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		if err := env.Backend.Leases.Release(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
}
