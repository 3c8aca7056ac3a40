package api_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/webordinary/webordinary/internal/api"
	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/router"
)

// TestStatusLeavesNoConsumers: status is polled (mail send --wait every 50 ms, the dashboard
// twice a second), so a read of it must leave nothing behind on the engine. 2,000 calls, the
// engine's consumers counted every 250, so that a leak of one consumer in 200 calls shows;
// then the engine still has room for everything else: a job runs end to end and status answers.
func TestStatusLeavesNoConsumers(t *testing.T) {
	t.Parallel()
	c, env := setupEnv(t)
	ctx := context.Background()
	runJob(t, c, "first")
	before := consumers(t, env.Server)
	const calls, parallel, chunk, slack = 2_000, 4, 250, 10
	for done := 0; done < calls; done += chunk {
		if err := statusCalls(ctx, c, chunk, parallel); err != nil {
			t.Fatalf("status after %d calls: %v", done, err)
		}
		// Checked as it goes: the old code left one consumer per call. The slack is for the
		// engine's own (a worker's tenant consumer), not one per call.
		if after := consumers(t, env.Server); after > before+slack {
			t.Fatalf("the engine holds %d consumers after %d status calls, %d before", after, done+chunk, before)
		}
	}
	runJob(t, c, "second")
	if st, err := c.Status(ctx); err != nil || len(st.Jobs) != 2 {
		t.Fatalf("status after the calls: %+v %v", st, err)
	}
}

// statusCalls reads the status n times, parallel at a time; it returns the first error.
func statusCalls(ctx context.Context, c *api.Client, n, parallel int) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if _, err := c.Status(ctx); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// runJob submits instruction and waits until it is done.
func runJob(t *testing.T, c interface {
	Submit(context.Context, router.Request) (broker.JobRecord, error)
	WaitJob(context.Context, string, time.Duration) (broker.JobRecord, error)
}, instruction string) {
	t.Helper()
	ctx := context.Background()
	rec, err := c.Submit(ctx, router.Request{Project: "site", User: "alice", Instruction: instruction})
	if err != nil {
		t.Fatalf("submit %q: %v", instruction, err)
	}
	if done, err := c.WaitJob(ctx, rec.Job.ID, 30*time.Second); err != nil || done.State != broker.StateDone {
		t.Fatalf("job %q: %+v %v", instruction, done, err)
	}
}

// consumers counts the consumers on every stream of the engine.
func consumers(t *testing.T, s *server.Server) int {
	t.Helper()
	info, err := s.Jsz(&server.JSzOptions{})
	if err != nil {
		t.Fatalf("jsz: %v", err)
	}
	return info.Consumers
}
