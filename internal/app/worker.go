package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/webordinary/webordinary/internal/agentstate"
	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/build"
	"github.com/webordinary/webordinary/internal/command"
	"github.com/webordinary/webordinary/internal/egress"
	"github.com/webordinary/webordinary/internal/jobenv"
	"github.com/webordinary/webordinary/internal/live"
	"github.com/webordinary/webordinary/internal/pipeline"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/sandbox"
	"github.com/webordinary/webordinary/internal/shots"
	"github.com/webordinary/webordinary/internal/worker"
)

// runsJobs reports whether this process runs jobs' code (and so needs the sandbox).
func (a *App) runsJobs() bool {
	return a.cfg.Worker.Count > 0 && a.cfg.Worker.Processor != ProcessorNoop
}

// parseJobEnv checks Worker.JobEnv (New: before anything binds).
func (a *App) parseJobEnv() error {
	vars, err := jobenv.Parse(a.cfg.Worker.JobEnv)
	if err != nil {
		return &FieldError{Field: "Worker.JobEnv", Value: a.cfg.Worker.JobEnv, Err: err}
	}
	a.jobVars = vars
	return nil
}

// openSandbox probes the sandbox for jobs whose files live under the worker directories.
// When jobs run as another uid the data directory gets search permission for others (not
// read: its contents are not listable), so the job's user can reach the workspaces below it;
// its secrets stay 0600 and outside every sandbox.
func (a *App) openSandbox() error {
	w := a.cfg.Worker
	if w.Sandbox != sandbox.ModeOff {
		if err := searchable(a.cfg.Data); err != nil {
			return err
		}
	}
	uid, gid := w.sandboxIDs()
	limits, _ := sandbox.ParseLimits(w.JobLimits) // checked by validate
	sb, err := sandbox.New(sandbox.Config{Mode: w.Sandbox, UID: uid, GID: gid, ReadOnly: w.SandboxReadOnly,
		Roots: []string{w.Workspaces, w.State}, Limits: limits})
	if err != nil {
		return &FieldError{Field: "Worker.Sandbox", Value: w.Sandbox, Err: err}
	}
	switch st := sb.Status(); {
	case st.Warning != "":
		a.log.Warn("jobs are not sandboxed", slog.String("sandbox", string(st.Mode)), slog.String("why", st.Warning))
	case st.NoCgroup != "":
		a.log.Warn("job limits are rlimits only", slog.String("limits", st.Limits), slog.String("why", st.NoCgroup))
	default:
		a.log.Info("job limits", slog.String("limits", st.Limits))
	}
	a.sandbox = sb
	return nil
}

// checkEgressAllow checks Worker.EgressAllow (New: before anything binds).
func (a *App) checkEgressAllow() error {
	for _, e := range a.cfg.Worker.EgressAllow {
		if err := egress.CheckAllow(e); err != nil {
			return &FieldError{Field: "Worker.EgressAllow", Value: a.cfg.Worker.EgressAllow, Err: err}
		}
	}
	return nil
}

// openEgress starts the egress proxy that is sandboxed jobs' only way out, once bwrap has
// shown it can give a job a network namespace of its own. Where it cannot, mode required
// refuses to start; otherwise jobs share the host's network and startup says so.
func (a *App) openEgress() error {
	if !a.sandbox.Active() {
		a.egressWhy = "jobs run unsandboxed"
		return nil
	}
	if err := a.sandbox.CheckNetwork(); err != nil {
		if a.cfg.Worker.Sandbox == sandbox.ModeRequired {
			return &FieldError{Field: "Worker.Sandbox", Value: a.cfg.Worker.Sandbox, Err: err}
		}
		a.egressWhy = err.Error()
		a.log.Warn("jobs share the host's network", slog.String("why", err.Error()))
		return nil
	}
	p, err := egress.New(egress.Config{Log: a.log})
	if err != nil {
		return err
	}
	a.egress = p
	return nil
}

// describeEgress is the job network part of the startup banner.
func (a *App) describeEgress() string {
	if a.egress == nil {
		return "WARNING: jobs share the host's network (" + a.egressWhy + "): they reach its loopback services and the agent holds the model key"
	}
	extra := ""
	if n := len(a.cfg.Worker.EgressAllow); n > 0 {
		extra = fmt.Sprintf(", %d sandbox.egress_allow", n)
	}
	return "jobs' network: their own, out through the egress proxy only (npm registry, git host, model APIs" + extra + ")"
}

// searchable adds search permission for others to dir when the platform runs as root (jobs then
// run as another uid).
func searchable(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm()&0o001 != 0 {
		return nil
	}
	if err := os.Chmod(dir, fi.Mode().Perm()|0o001); err != nil {
		return fmt.Errorf("let the sandboxed jobs' user reach %s: %w", dir, err)
	}
	return nil
}

// newPool builds this process's workers; previewPort is the port in reported preview links.
func (a *App) newPool(ctx context.Context, b *broker.Backend, hub *live.Hub, previewPort int) (*worker.Pool, error) {
	proc, err := a.newProcessor(ctx, b, hub, previewPort)
	if err != nil {
		return nil, err
	}
	w := a.cfg.Worker
	cfg := worker.Config{Backend: b, Processor: proc, Logger: a.log, Workers: w.Count, LeaseTTL: w.LeaseTTL,
		IdleRelease: w.IdleRelease, Quantum: w.Quantum, MaxAttempts: w.MaxAttempts, ShutdownGrace: w.ShutdownGrace,
		WarmFor: w.WarmFor, IdleExit: w.IdleExit}
	if a.sandbox != nil {
		cfg.Sandbox = a.sandbox.Short()
	}
	return worker.New(cfg)
}

func (a *App) newProcessor(ctx context.Context, b *broker.Backend, hub *live.Hub, previewPort int) (worker.Processor, error) {
	w := a.cfg.Worker
	switch w.Processor {
	case ProcessorPipeline:
		return a.newPipeline(ctx, b, hub, previewPort)
	case ProcessorCommand:
		return command.New(command.Config{Command: w.AgentCommand, Root: w.Workspaces, Sandbox: a.sandbox, JobEnv: a.jobVars,
			Egress: a.egress, EgressAllow: w.EgressAllow})
	}
	return worker.ProcessorFunc(func(context.Context, worker.Task) (worker.Outcome, error) {
		return worker.Outcome{Summary: "noop"}, nil
	}), nil
}

func (a *App) newPipeline(ctx context.Context, b *broker.Backend, hub *live.Hub, previewPort int) (worker.Processor, error) {
	projects, err := project.Open(ctx, b)
	if err != nil {
		return nil, err
	}
	threads, err := project.OpenThreads(ctx, b)
	if err != nil {
		return nil, err
	}
	w := a.cfg.Worker
	target, err := a.previewTarget(ctx, b, previewPort)
	if err != nil {
		return nil, err
	}
	sh, err := a.shooter()
	if err != nil {
		return nil, err
	}
	var states *agentstate.Store
	if w.StateMaxBytes >= 0 {
		if states, err = agentstate.Open(ctx, b, w.StateMaxBytes); err != nil {
			return nil, err
		}
	}
	packages, err := a.packages()
	if err != nil {
		return nil, err
	}
	return pipeline.New(pipeline.Config{Projects: projects, Threads: threads, Workspaces: w.Workspaces, Packages: packages,
		State: w.State, Preview: target, BuildTimeout: w.BuildTimeout, ModelRetryBudget: w.ModelRetryBudget, AgentBaseURL: w.AgentBaseURL, ClaudeLogin: w.ClaudeLogin, Logger: a.log, Live: hub.Writer,
		Sandbox: a.sandbox, Egress: a.egress, EgressAllow: w.EgressAllow, JobEnv: a.jobVars, Shots: sh, States: states, Jobs: b.Jobs})
}

// packages is the package cache the pipeline's installs share; nil with Packages "off".
func (a *App) packages() (*build.Packages, error) {
	dir := a.cfg.Worker.Packages
	if dir == PackagesOff {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, &FieldError{Field: "Worker.Packages", Value: dir, Err: err}
	}
	return &build.Packages{Dir: dir}, nil
}

// shooter is the pipeline's picture taker; nil with Chromium "off".
func (a *App) shooter() (*shots.Shooter, error) {
	w := a.cfg.Worker
	if w.Chromium == ChromiumOff {
		return nil, nil
	}
	sh, err := shots.New(shots.Config{Dir: w.Shots, Remote: a.shotsRemote, Browser: w.Chromium, Sandbox: a.sandbox, Pages: w.ShotPages,
		PageBudget: w.ShotBudget, Logger: a.log})
	if err != nil {
		return nil, &FieldError{Field: "Worker.Chromium", Value: w.Chromium, Err: err}
	}
	return sh, nil
}

// pictures is where serve reads the pictures for replies and job pages; nil with Chromium "off".
func (a *App) pictures() *shots.Store {
	if a.cfg.Worker.Chromium == ChromiumOff {
		return nil
	}
	return &shots.Store{Dir: a.cfg.Worker.Shots, Remote: a.shotsRemote}
}

// openShotsRemote opens the engine's pictures store when previews live in the engine or in
// S3, the shapes where workers and serve share no disk: worker.shots is then each machine's own.
func (a *App) openShotsRemote(ctx context.Context, b *broker.Backend) error {
	w := a.cfg.Worker
	if w.Chromium == ChromiumOff || (w.Previews != PreviewsEngine && w.PreviewTarget == "") {
		return nil
	}
	blobs, err := b.Blobs(ctx, shots.BlobStore, broker.BlobMaxAge(shots.Keep))
	if err != nil {
		return fmt.Errorf("open the engine's pictures store: %w", err)
	}
	a.shotsRemote = blobs
	return nil
}

// describeSandbox is the sandbox line of the startup banner.
func (a *App) describeSandbox() string {
	if a.sandbox == nil {
		return "none (no jobs run here)"
	}
	return a.sandbox.String() + "; " + a.describeEgress()
}

// prunePictures removes, now and every hour, the pictures serve fetched or its workers took
// that are older than shots.Keep (a worker process prunes its own as it shoots).
func prunePictures(s shots.Store) func(context.Context) error {
	return func(ctx context.Context) error {
		t := time.NewTicker(time.Hour)
		defer t.Stop()
		for {
			s.Prune(ctx, time.Now())
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}
}
