// Package command is the command processor: it runs a configured shell command for each job
// in a per-tenant directory, with the instruction on stdin and the job in WO_* variables.
// Exit 0 means done. It is the agent package's "command" kind without git, build or preview:
// the same supervisor (every process the command starts dies on interrupt, lease loss, or the
// worker's own death), environment allowlist, output tail and watchdogs.
package command

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/agent"
	"github.com/webordinary/webordinary/internal/egress"
	"github.com/webordinary/webordinary/internal/jobenv"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/pipeline/report"
	"github.com/webordinary/webordinary/internal/sandbox"
	"github.com/webordinary/webordinary/internal/worker"
)

// Config configures the processor.
type Config struct {
	// Command is run with `sh -c`. Required.
	Command string
	// Root holds one directory per tenant: Root/<project>/<user>. Required.
	Root string
	// Env is added to the command's environment (KEY=VALUE). The rest of the environment is
	// the agent allowlist (PATH, HOME, locale, model credentials), never the platform's secrets.
	Env []string
	// InterruptGrace is how long the command gets after SIGINT before everything is killed.
	// Default 5s.
	InterruptGrace time.Duration
	// Sandbox runs each command sandboxed, seeing only its tenant's directory (nil or
	// inactive: unsandboxed).
	Sandbox *sandbox.Sandbox
	// JobEnv are variables passed on purpose (--job-env).
	JobEnv []jobenv.Var
	// Egress, when set and Sandbox is active, is the command's only way out (see
	// egress.Session): it reaches EgressAllow and the model APIs (vendors' endpoints, with
	// the job's token instead of the platform's keys). Nil: the host's network.
	Egress      *egress.Proxy
	EgressAllow []string
}

// Processor implements worker.Processor.
type Processor struct{ cfg Config }

var _ worker.Processor = (*Processor)(nil)

// New validates cfg.
func New(cfg Config) (*Processor, error) {
	if strings.TrimSpace(cfg.Command) == "" {
		return nil, errors.New("command: no command configured (Config.Command, e.g. 'cat >> instructions.txt')")
	}
	if cfg.Root == "" {
		return nil, errors.New("command: no workspace root configured")
	}
	if cfg.InterruptGrace == 0 {
		cfg.InterruptGrace = 5 * time.Second
	}
	return &Processor{cfg: cfg}, nil
}

// Process runs the command for task.
func (p *Processor) Process(ctx context.Context, task worker.Task) (worker.Outcome, error) {
	dir := filepath.Join(p.cfg.Root, task.Job.Tenant.Project, task.Job.Tenant.User)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return worker.Outcome{}, fmt.Errorf("command: workspace %s: %w", dir, err)
	}
	if err := p.cfg.Sandbox.Own(dir); err != nil {
		return worker.Outcome{}, fmt.Errorf("command: %w", err)
	}
	sess, err := p.openEgress()
	if err != nil {
		return worker.Outcome{}, fmt.Errorf("command: %w", err)
	}
	defer sess.Close()
	spec := agent.Spec{Kind: agent.KindCommand, Command: p.cfg.Command, InterruptGrace: p.cfg.InterruptGrace}
	jail := p.cfg.Sandbox.Jail(sandbox.Spec{Writable: []string{dir}, Egress: p.egressSpec(sess)})
	req := agent.Request{Dir: dir, Prompt: jobspec.Of(task.Job).Instruction, Env: p.env(task, sess), Home: dir, Jail: jail}
	res, err := agent.Run(ctx, spec, req)
	out := worker.Outcome{Summary: res.Summary, ExitCode: res.ExitCode, OutputTail: res.OutputTail,
		Report: report.Report{DurationMs: res.Duration.Milliseconds(), EgressDenied: denials(sess),
			ModelTokensIn: sess.Usage().InputTokens, ModelTokensOut: sess.Usage().OutputTokens}}
	var over error
	if err == nil && ctx.Err() == nil {
		over = jail.OverLimit(res.OK, res.ExitCode, res.OutputTail)
	}
	switch {
	case err != nil:
		return out, fmt.Errorf("command: %w", err)
	case over != nil:
		return out, fmt.Errorf("%w: command: %w", worker.ErrPermanent, over)
	case ctx.Err() != nil:
		return out, context.Cause(ctx)
	case !res.OK:
		return out, fmt.Errorf("command: %s", res.Error)
	}
	return out, nil
}

func (p *Processor) env(task worker.Task, sess *egress.Session) []string {
	j := task.Job
	env := append(append(jobenv.Environ(os.LookupEnv, nil, p.cfg.JobEnv), p.cfg.Env...),
		"WO_PROJECT="+j.Tenant.Project, "WO_USER="+j.Tenant.User, "WO_THREAD="+j.Thread, "WO_JOB="+j.ID, "WO_WORKER="+task.Worker,
		fmt.Sprintf("WO_ATTEMPT=%d", task.Attempt), fmt.Sprintf("WO_LEASE_TOKEN=%d", task.LeaseToken))
	if sess != nil {
		env = append(append(env, sess.Env()...), sess.AgentEnv()...)
	}
	return env
}

// openEgress starts the job's egress session; nil without a proxy or a sandbox.
func (p *Processor) openEgress() (*egress.Session, error) {
	if p.cfg.Egress == nil || !p.cfg.Sandbox.Active() {
		return nil, nil
	}
	var models []egress.Model
	for _, api := range []string{"anthropic", "openai"} {
		if m, err := egress.ModelFromEnv(api, ""); err == nil {
			models = append(models, m)
		}
	}
	return p.cfg.Egress.Open(egress.Policy{Allow: p.cfg.EgressAllow, Models: models})
}

func (p *Processor) egressSpec(sess *egress.Session) *sandbox.Egress {
	if sess == nil {
		return nil
	}
	return &sandbox.Egress{Socket: sess.Socket, Port: p.cfg.Egress.Port()}
}

func denials(sess *egress.Session) []report.EgressDenial {
	var out []report.EgressDenial
	for _, d := range sess.Denied() {
		out = append(out, report.EgressDenial{Target: d.Target, Reason: d.Reason, Count: d.Count})
	}
	return out
}
