package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/webordinary/webordinary/internal/agentstate"
	"github.com/webordinary/webordinary/internal/worker"
)

// stateSaveTimeout bounds saving a tenant's agent state after a job.
const stateSaveTimeout = time.Minute

// restoreState brings the tenant's agent state from the engine on the first job after a
// claim (a new lease token), when the local copy is missing or not the saved version. An
// engine error fails the job (retried): the thread's session must not silently start over.
func (r *run) restoreState(ctx context.Context) error {
	st := r.p.cfg.States
	if st == nil || !r.p.firstUnderLease(r.task) {
		return nil
	}
	var restored bool
	var stats agentstate.Stats
	err := r.stage("state-restore", func() (err error) {
		restored, stats, err = st.Restore(ctx, r.task.Job.Tenant, r.state)
		return err
	})
	if err != nil {
		r.p.forget(r.task)
		return err
	}
	if !restored {
		return nil
	}
	r.log.InfoContext(ctx, "agent state restored from the engine",
		slog.Int("files", stats.Files), slog.Int("bytes", stats.Bytes))
	for _, d := range []string{r.agentDir(), r.homeDir()} { // restored files belong to the job's user
		if err := r.p.cfg.Sandbox.Own(d); err != nil {
			return err
		}
	}
	return nil
}

// saveState stores the tenant's agent state after a job the agent ran in (done, failed or
// interrupted), while the lease is still ours; never after losing it, when the state may
// already be the next owner's. Its failure is logged, never the job's.
func (r *run) saveState(ctx context.Context) {
	st := r.p.cfg.States
	if _, ran := r.stages["agent"]; st == nil || !ran {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stateSaveTimeout)
	defer cancel()
	if err := r.task.CheckLease(cctx); err != nil {
		r.log.WarnContext(ctx, "agent state not saved: the lease is gone", slog.Any("err", err))
		return
	}
	var stats agentstate.Stats
	err := r.stage("state-save", func() (err error) {
		stats, err = st.Save(cctx, r.task.Job.Tenant, r.state)
		return err
	})
	switch {
	case errors.Is(err, agentstate.ErrTooLarge):
		r.log.WarnContext(ctx, "agent state stays on this machine", slog.Any("err", err))
	case err != nil:
		r.log.WarnContext(ctx, "agent state not saved", slog.Any("err", err))
	default:
		r.log.InfoContext(ctx, "agent state saved", slog.Int("files", stats.Files), slog.Int("bytes", stats.Bytes),
			slog.Int64("ms", r.stages["state-save"]))
	}
}

// firstUnderLease reports whether task is the first job of its tenant under its lease token
// on this pipeline, and remembers it.
func (p *Pipeline) firstUnderLease(task worker.Task) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if tok, ok := p.checked[task.Job.Tenant]; ok && tok == task.LeaseToken {
		return false
	}
	p.checked[task.Job.Tenant] = task.LeaseToken
	return true
}

// forget makes the next job of task's tenant check the engine again.
func (p *Pipeline) forget(task worker.Task) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.checked, task.Job.Tenant)
}
