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

// The cost of fencing a record write on natsjs (a lease read before the compare-and-set):
// compare BenchmarkJobsUpdate with BenchmarkJobsUpdateFenced. Sync off: the difference, not
// the disk, is measured.

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

func benchUpdate(b *testing.B, writer func(*broker.Backend, broker.Lease) func(context.Context, string, func(*broker.JobRecord) error) (broker.JobRecord, error)) {
	env := natsjstest.Start(b, natsjstest.Options{NoSync: true})
	ctx := context.Background()
	tn := tenant.ID{Project: "site", User: "alice"}
	job := broker.Job{ID: broker.NewJobID(), Tenant: tn, Payload: json.RawMessage(`{"instruction":"x"}`)}
	if err := env.Backend.Jobs.Create(ctx, broker.QueuedRecord(job)); err != nil {
		b.Fatal(err)
	}
	l, err := env.Backend.Leases.Acquire(ctx, tn, "w1", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	update := writer(env.Backend, l)
	for b.Loop() {
		if _, err := update(ctx, job.ID, func(r *broker.JobRecord) error { r.Attempts++; return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
