package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/agent"
	"github.com/webordinary/webordinary/internal/agentstate"
	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/build"
	"github.com/webordinary/webordinary/internal/egress"
	"github.com/webordinary/webordinary/internal/jobenv"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/preview"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/sandbox"
	"github.com/webordinary/webordinary/internal/shots"
	"github.com/webordinary/webordinary/internal/tenant"
	"github.com/webordinary/webordinary/internal/worker"
	"github.com/webordinary/webordinary/internal/workspace"
)

// Config configures the pipeline.
type Config struct {
	Projects *project.Store
	Threads  *project.Threads
	// Workspaces holds one working copy per tenant: Workspaces/<project>/<user>.
	Workspaces string
	// State holds per-tenant agent config and build state: State/<project>/<user>/...
	State string
	// Preview publishes built sites.
	Preview preview.Target
	// Production publishes a project's live site ("publish" and "undo" jobs). Default:
	// Preview, when it implements preview.Production.
	Production preview.Production
	// BuildTimeout bounds install + build. Default 10m.
	BuildTimeout time.Duration
	// ModelRetryBudget bounds the waiting for a model service that turned the agent away
	// (HTTP 429/529, overloaded, unreachable): the agent is run again after the delay the
	// service asked for (else a backoff from ModelRetryBackoff, doubling, at most a minute)
	// while the waits so far plus the next fit in it; then the job fails for good and the
	// owner is told the model service was unavailable. Default DefaultModelRetryBudget;
	// negative: no retries.
	ModelRetryBudget time.Duration
	// ModelRetryBackoff is the first wait when the service named no delay. Default
	// DefaultModelRetryBackoff.
	ModelRetryBackoff time.Duration
	// ClaudeLogin is a Claude Code config directory holding a subscription login (`claude
	// /login`); when set, every claude agent gets a read-only copy of its access token in its
	// own config directory before each run (agent.ShareClaudeLogin), never the refresh token
	// and nothing else of the platform's. An expired login fails the job for good (the
	// operator is told).
	ClaudeLogin string
	// AgentBaseURL is the model API endpoint for projects that set none
	// (project.AgentSpec.BaseURL; agent.Spec.BaseURL). Empty: the vendors'.
	AgentBaseURL string
	// Live, when set, receives a job's agent and build output as it happens.
	Live func(jobID string) io.Writer
	// Sandbox runs the agent, install and build of every job (nil or inactive: unsandboxed).
	Sandbox *sandbox.Sandbox
	// Packages, when set, is the package cache all tenants' installs share (see
	// build.Packages); its directory must be reachable by the jobs' user and bound by no jail.
	Packages *build.Packages
	// Egress, when set and Sandbox is active, is every job's only way out: its agent, install
	// and build run in a network of their own and reach the npm registry, the git host of
	// the project's remote, EgressAllow, the project's EgressAllow and the model APIs through
	// it; the agent gets a per-job token instead of the model keys. Nil: jobs share the host's
	// network.
	Egress *egress.Proxy
	// EgressAllow are hosts every job may reach besides those (egress.Policy.Allow).
	EgressAllow []string
	// JobEnv are variables passed on purpose to every job's agent and build (--job-env).
	JobEnv []jobenv.Var
	// Shots, when set, takes pictures of the pages each job changed after its push, if
	// Preview can read versions back (preview.Versions). Their failure never fails the job.
	Shots *shots.Shooter
	// States, when set, carries each tenant's agent state (agent/ and home/ under State)
	// through the engine: restored on the first job after a claim when the local copy is
	// missing or stale, saved after every job the agent ran in. Nil: it stays on this machine.
	States *agentstate.Store
	// Jobs, when set, is where a job that waits for a busy model service says so
	// (broker.JobRecord.BusySince), for the mail router to tell its owner. Nil: nobody is
	// told before the job ends.
	Jobs   broker.Jobs
	Logger *slog.Logger
}

// Defaults of Config's fields.
const (
	DefaultModelRetryBudget  = 10 * time.Minute
	DefaultModelRetryBackoff = 5 * time.Second
)

// Pipeline implements worker.Processor.
type Pipeline struct {
	cfg Config

	mu      sync.Mutex
	checked map[tenant.ID]uint64 // the lease token under which each tenant's state was last restored
}

var _ worker.Processor = (*Pipeline)(nil)

// New validates cfg.
func New(cfg Config) (*Pipeline, error) {
	switch {
	case cfg.Projects == nil || cfg.Threads == nil:
		return nil, errors.New("pipeline: project and thread stores are required")
	case cfg.Workspaces == "" || cfg.State == "":
		return nil, errors.New("pipeline: workspace and state directories are required")
	case cfg.Preview == nil:
		return nil, errors.New("pipeline: a preview target is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ModelRetryBudget == 0 {
		cfg.ModelRetryBudget = DefaultModelRetryBudget
	}
	if cfg.ModelRetryBackoff <= 0 {
		cfg.ModelRetryBackoff = DefaultModelRetryBackoff
	}
	for _, d := range []string{cfg.Workspaces, cfg.State} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("pipeline: %w", err)
		}
	}
	return &Pipeline{cfg: cfg, checked: map[tenant.ID]uint64{}}, nil
}

// Process runs one job through the pipeline.
func (p *Pipeline) Process(ctx context.Context, task worker.Task) (worker.Outcome, error) {
	// The job's deploys carry its lease: a store refuses a pointer switch once a newer owner
	// of the tenant switched it (preview.Fence).
	ctx = preview.WithFence(ctx, preview.Fence{Holder: task.Job.Tenant.String(), Token: task.LeaseToken})
	r, err := p.newRun(ctx, task)
	if err != nil {
		return worker.Outcome{Summary: err.Error()}, err
	}
	if err := r.openEgress(); err != nil {
		return worker.Outcome{Summary: err.Error()}, err
	}
	defer r.closeEgress() // also if execute panics (Close is idempotent)
	out, err := r.execute(ctx)
	r.closeEgress() // the job's network ends with its work, before its state is saved
	r.saveState(ctx)
	return out, err
}

func (p *Pipeline) newRun(ctx context.Context, task worker.Task) (*run, error) {
	job := task.Job
	proj, err := p.cfg.Projects.Get(ctx, job.Tenant.Project)
	if err != nil {
		return nil, permanentIf(err, project.ErrNotFound)
	}
	th, err := p.cfg.Threads.Ensure(ctx, job.Thread, job.Tenant)
	if err != nil {
		return nil, permanentIf(err, project.ErrThreadOwner)
	}
	spec := jobspec.Of(job)
	remote := cmp.Or(spec.RepoURL, proj.RepoURL)
	state := filepath.Join(p.cfg.State, job.Tenant.Project, job.Tenant.User)
	// 0755 before the askpass helper's 0700 git/ below it: a sandboxed job's user must reach
	// its agent state and home here.
	if err := os.MkdirAll(state, 0o755); err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	env, err := workspace.AskpassEnv(filepath.Join(state, "git"))
	if err != nil && !errors.Is(err, workspace.ErrNoToken) {
		return nil, err
	}
	r := &run{p: p, task: task, spec: spec, proj: proj, thread: th, state: state, start: time.Now(), stages: map[string]int64{},
		log: p.cfg.Logger.With(slog.String("tenant", job.Tenant.String()), slog.String("job", job.ID))}
	r.ws = &workspace.Workspace{Dir: filepath.Join(p.cfg.Workspaces, job.Tenant.Project, job.Tenant.User),
		Remote: remote, Env: env, Log: r.output()}
	return r, nil
}

// agentSpec turns the project's agent settings into the agent package's spec.
// agentSpec is a project's agent; baseURL is the endpoint when the project names none.
func agentSpec(a project.AgentSpec, baseURL string) agent.Spec {
	return agent.Spec{Kind: a.Kind, Command: a.Command, Model: a.Model, MaxTurns: a.MaxTurns,
		MaxBudgetUSD: a.MaxBudgetUSD, WallClock: a.WallClock, NoOutput: a.NoOutput, BaseURL: cmp.Or(a.BaseURL, baseURL)}
}

// permanentIf marks err permanent when it is one of the errors retrying cannot fix; anything
// else (a broker timeout) is left to the worker's retries.
func permanentIf(err error, permanent ...error) error {
	for _, p := range permanent {
		if errors.Is(err, p) {
			return fmt.Errorf("%w: %w", worker.ErrPermanent, err)
		}
	}
	return err
}
