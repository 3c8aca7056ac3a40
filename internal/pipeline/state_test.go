package pipeline_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/agentstate"
	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/pipeline"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/worker"
)

// machine is a pipeline with directories of its own on the fixture's engine: another worker
// machine with no shared mount.
func (f *fixture) machine(t *testing.T) *pipeline.Pipeline {
	t.Helper()
	ctx := context.Background()
	states, err := agentstate.Open(ctx, f.env.Backend, 0)
	if err != nil {
		t.Fatal(err)
	}
	projects, _ := project.Open(ctx, f.env.Backend)
	dir := t.TempDir()
	p, err := pipeline.New(pipeline.Config{Projects: projects, Threads: f.threads, Workspaces: filepath.Join(dir, "ws"),
		State: filepath.Join(dir, "state"), Preview: f.target, States: states})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func underLease(tk worker.Task, token uint64, check func(context.Context) error) worker.Task {
	tk.LeaseToken = token
	if check != nil {
		tk.CheckLease = check
	}
	return tk
}

func process(t *testing.T, p *pipeline.Pipeline, tk worker.Task) (worker.Outcome, error) {
	t.Helper()
	return p.Process(t.Context(), tk)
}

// TestAgentStateTravelsBetweenMachines: the session of a thread follows its tenant from one
// pipeline to another through the engine — saved after a failed job too, restored on the
// first job under a new lease when the local copy is stale, never saved without the lease.
func TestAgentStateTravelsBetweenMachines(t *testing.T) {
	t.Parallel()
	f := setup(t, site, nil)
	a, b := f.machine(t), f.machine(t)
	out, err := process(t, a, underLease(task("t1", "write a.txt: one\nfail on purpose"), 1, nil))
	if err == nil {
		t.Fatalf("job 1 on A: expected the agent's failure, got %q", out.Summary)
	}
	if _, ok := out.Report.StagesMs["state-save"]; !ok {
		t.Fatalf("job 1: expected a state-save stage after the failed agent, got %v", out.Report.StagesMs)
	}
	out, err = process(t, b, underLease(task("t1", "write b.txt: two"), 2, nil))
	if err != nil || !strings.Contains(out.Summary, "resumed session") || !strings.Contains(out.Summary, "(turn 2)") {
		t.Fatalf("job 2 on B: expected turn 2 of the session, got %q, %v", out.Summary, err)
	}
	out, err = process(t, a, underLease(task("t1", "write c.txt: three"), 3, nil))
	if err != nil || !strings.Contains(out.Summary, "(turn 3)") {
		t.Fatalf("job 3 back on A (stale local copy): expected turn 3, got %q, %v", out.Summary, err)
	}
	key := agentstate.Key(task("t1", "").Job.Tenant)
	states, _ := f.env.Backend.Blobs(t.Context(), agentstate.BlobStore)
	before, _ := states.Version(t.Context(), key)
	lost := func(context.Context) error { return broker.ErrLeaseLost }
	if _, err := process(t, b, underLease(task("t1", "write d.txt: four"), 4, lost)); err == nil {
		t.Fatal("job 4 without the lease: expected an error")
	}
	if after, _ := states.Version(t.Context(), key); after != before {
		t.Fatalf("job 4 lost its lease: expected the saved state untouched (%s), got %s", before, after)
	}
}
