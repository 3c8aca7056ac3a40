package mem_test

import (
	"context"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/mem"
)

// The speed the backend exists for: a job's trip through the inbox, a tenure's lease
// operations, a record's update. Run with: go test -bench . ./internal/broker/mem

func BenchmarkInboxPublishNextAck(b *testing.B) {
	ctx := context.Background()
	be := mem.New(mem.Config{})
	defer func() { _ = be.Close() }()
	q, err := be.Inbox.Open(ctx, alice, broker.QueueOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		if err := be.Inbox.Publish(ctx, job(i)); err != nil {
			b.Fatal(err)
		}
		d, err := q.Next(ctx, time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Ack(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLeaseAcquireRenewRelease(b *testing.B) {
	ctx := context.Background()
	be := mem.New(mem.Config{})
	defer func() { _ = be.Close() }()
	for b.Loop() {
		l, err := be.Leases.Acquire(ctx, alice, "w1", time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if l, err = be.Leases.Renew(ctx, l); err != nil {
			b.Fatal(err)
		}
		if err := be.Leases.Release(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJobsUpdate(b *testing.B) {
	ctx := context.Background()
	be := mem.New(mem.Config{})
	defer func() { _ = be.Close() }()
	rec := broker.JobRecord{Job: job(1), State: broker.StateQueued}
	if err := be.Jobs.Create(ctx, rec); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		_, err := be.Jobs.Update(ctx, rec.Job.ID, func(r *broker.JobRecord) error { r.Attempts++; return nil })
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkJobsUpdateFenced is BenchmarkJobsUpdate through the lease holder's fence (the
// lease checked in the same step as the compare-and-set).
func BenchmarkJobsUpdateFenced(b *testing.B) {
	ctx := context.Background()
	be := mem.New(mem.Config{})
	defer func() { _ = be.Close() }()
	rec := broker.JobRecord{Job: job(1), State: broker.StateQueued}
	if err := be.Jobs.Create(ctx, rec); err != nil {
		b.Fatal(err)
	}
	l, err := be.Leases.Acquire(ctx, alice, "w1", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	f := broker.NewFence(be, l)
	for b.Loop() {
		_, err := f.UpdateJob(ctx, rec.Job.ID, func(r *broker.JobRecord) error { r.Attempts++; return nil })
		if err != nil {
			b.Fatal(err)
		}
	}
}
