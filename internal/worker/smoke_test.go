package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/worker"
)

func TestSmoke(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, f *fixture) {
		ran := make(chan string, 10)
		f.pool(worker.Config{Workers: 2, Processor: worker.ProcessorFunc(func(ctx context.Context, task worker.Task) (worker.Outcome, error) {
			ran <- task.Job.ID
			return worker.Outcome{Summary: "ok " + task.Job.Instruction}, nil
		})})
		rec := f.submit("site", "alice", "hello")
		got := f.wait(rec.Job.ID, 10*time.Second)
		if got.State != broker.StateDone || got.Result == nil || got.Result.Summary != "ok hello" {
			t.Fatalf("got %+v", got)
		}
	})
}
