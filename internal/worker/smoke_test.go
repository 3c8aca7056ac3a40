package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/worker"
)

func TestSmoke(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, f *fixture) {
		ran := make(chan string, 10)
		f.pool(worker.Config{Workers: 2, Processor: worker.ProcessorFunc(func(ctx context.Context, task worker.Task) (worker.Outcome, error) {
			ran <- task.Job.ID
			return worker.Outcome{Summary: "ok " + jobspec.Of(task.Job).Instruction}, nil
		})})
		rec := f.submit("site", "alice", "hello")
		got := f.wait(rec.Job.ID, 10*time.Second)
		if got.State != broker.StateDone || got.Result == nil || got.Result.Summary != "ok hello" {
			t.Fatalf("got %+v", got)
		}
	})
}

// TestIdleExit: with IdleExit, a pool runs its jobs and returns ErrIdleExit once no worker
// has run a job for that long, having released the tenant it still owned.
func TestIdleExit(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, f *fixture) {
		b, _ := f.connect()
		p, err := worker.New(worker.Config{Backend: b, Workers: 2, IdleExit: 300 * time.Millisecond,
			LeaseTTL: time.Second, Logger: testLogger(t),
			Processor: worker.ProcessorFunc(func(context.Context, worker.Task) (worker.Outcome, error) {
				time.Sleep(400 * time.Millisecond) // longer than IdleExit: a busy worker is not idle
				return worker.Outcome{}, nil
			})})
		if err != nil {
			t.Fatal(err)
		}
		rec := f.submit("site", "alice", "hello")
		done := make(chan error, 1)
		go func() { done <- p.Run(context.Background()) }()
		if got := f.wait(rec.Job.ID, 10*time.Second); got.State != broker.StateDone {
			t.Fatalf("job ended %s; want done before the pool exits", got.State)
		}
		select {
		case err := <-done:
			if !errors.Is(err, worker.ErrIdleExit) {
				t.Fatalf("Run returned %v; want ErrIdleExit", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("pool still running 10s after its last job with IdleExit 300ms")
		}
		if _, err := f.b.Leases.Get(context.Background(), rec.Job.Tenant); !errors.Is(err, broker.ErrNotFound) {
			t.Fatalf("lease after idle exit: %v; want none (released)", err)
		}
	})
}
