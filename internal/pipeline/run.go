package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/agent"
	"github.com/webordinary/webordinary/internal/build"
	"github.com/webordinary/webordinary/internal/egress"
	"github.com/webordinary/webordinary/internal/failure"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/metrics"
	"github.com/webordinary/webordinary/internal/pipeline/report"
	"github.com/webordinary/webordinary/internal/preview"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/sandbox"
	"github.com/webordinary/webordinary/internal/shots"
	"github.com/webordinary/webordinary/internal/worker"
	"github.com/webordinary/webordinary/internal/workspace"
)

// run is one job going through the pipeline.
type run struct {
	p      *Pipeline
	task   worker.Task
	spec   jobspec.Spec // what task.Job asks
	proj   project.Project
	thread project.Thread
	ws     *workspace.Workspace
	state  string
	start  time.Time
	stages map[string]int64 // milliseconds per stage
	log    *slog.Logger

	base        string            // the branch head the job started from
	beforeTurn  map[string]string // the changed files before a repair turn (see stageWork)
	attachments []string
	continues   []string // the thread's interrupted jobs this job's agent was told about
	agentRes    agent.Result
	// modelRetries and modelWait count the agent runs repeated because the model service
	// turned them away, and the waiting; modelGaveUp: the retry budget ran out.
	modelRetries int
	modelWait    time.Duration
	modelGaveUp  bool
	buildRes     build.Result
	deploy       preview.Deployment
	warm         *shots.Warm // the browser for the pictures, started before the build
	pictures     string      // the check turn's pictures, readable by the agent (see check.go)
	check        *report.Check
	leftOut      []workspace.LeftOut // what staging left out, each path once
	egress       *egress.Session     // the job's way out (see egress.go); nil: none
}

func (r *run) execute(ctx context.Context) (worker.Outcome, error) {
	switch r.spec.Action {
	case jobspec.ActionPublish:
		return r.publishLive(ctx)
	case jobspec.ActionUndo:
		return r.undoLive(ctx)
	}
	if err := r.stage("git", func() error { return r.prepare(ctx) }); err != nil {
		return r.stopped(ctx, err)
	}
	if sha, _ := r.ws.FindTrailer(ctx, "HEAD", "Command-Id", r.task.Job.ID); sha != "" {
		return r.resend(ctx, sha)
	}
	if err := r.keepBaseline(ctx); err != nil {
		return r.stopped(ctx, err)
	}
	if err := r.saveAttachments(); err != nil {
		return r.outcome(""), fmt.Errorf("%w: %w", worker.ErrPermanent, err)
	}
	if err := r.restoreState(ctx); err != nil {
		return r.outcome(""), err
	}
	if err := r.own(); err != nil {
		return r.outcome(""), err
	}
	if err := r.runAgent(ctx, r.prompt()); err != nil {
		return r.stopped(ctx, err)
	}
	r.handedOverDone(ctx)
	dirty, err := r.dirty(ctx)
	if err != nil || !dirty {
		return r.noChanges(), err
	}
	r.warm = r.p.cfg.Shots.Warm(ctx) // the pictures' browser starts while the site builds
	defer r.warm.Close()
	if err := r.buildWithRepair(ctx); err != nil {
		return r.stopped(ctx, err)
	}
	out, err := r.publish(ctx)
	if err != nil && errors.Is(context.Cause(ctx), worker.ErrInterrupted) {
		return r.interrupted(ctx) // keep the finished work: commit (if not yet) and push
	}
	return out, err
}

// prepare syncs the workspace and checks out the thread's branch from its head.
func (r *run) prepare(ctx context.Context) error {
	if err := r.ws.Sync(ctx); err != nil {
		return err
	}
	if err := r.ws.Checkout(ctx, r.thread.Branch, r.proj.DefaultBranch); err != nil {
		return err
	}
	var err error
	r.base, err = r.ws.Head(ctx)
	return err
}

// stopped handles an agent or build that did not complete: interrupted (commit the partial
// work, nothing is lost), lease lost or shut down (touch nothing), or failed.
func (r *run) stopped(ctx context.Context, err error) (worker.Outcome, error) {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, worker.ErrInterrupted):
		return r.interrupted(ctx)
	case ctx.Err() != nil:
		return r.outcome(""), cause
	}
	return r.outcome(""), err
}

// publish deploys, commits and pushes, checking the lease before each irreversible step.
func (r *run) publish(ctx context.Context) (worker.Outcome, error) {
	if err := r.task.CheckLease(ctx); err != nil {
		return r.outcome(""), err
	}
	if err := r.stage("deploy", func() error { return r.deployPreview(ctx) }); err != nil {
		return r.outcome(""), err
	}
	if r.proj.CheckTurn {
		if err := r.lookAgain(ctx); err != nil {
			return r.outcome(""), err
		}
	}
	var sha string
	err := r.stage("commit", func() (err error) {
		sha, _, err = r.ws.Commit(ctx, r.commitMessage(), r.author(), r.trailers())
		return err
	})
	if err != nil {
		return r.outcome(""), err
	}
	if err := r.task.CheckLease(ctx); err != nil {
		return r.outcome(sha), err
	}
	if err := r.stage("push", func() error { return r.push(ctx) }); err != nil {
		return r.outcome(sha), err
	}
	r.recordBuilt(ctx)
	if !r.proj.CheckTurn { // else taken before the commit, for the check turn
		r.stage("shots", func() error { r.takeShots(ctx, sha); return nil })
	}
	return r.outcome(sha), nil
}

func (r *run) push(ctx context.Context) error {
	if err := r.task.CheckLease(ctx); err != nil {
		return err
	}
	return r.ws.Push(ctx, r.thread.Branch)
}

func (r *run) deployPreview(ctx context.Context) error {
	site := preview.Site{Project: r.proj.ID, Thread: r.thread.ID}
	dir, cleanup, err := r.siteDir(ctx)
	if err != nil {
		return err
	}
	defer cleanup()
	r.deploy, err = r.p.cfg.Preview.Deploy(ctx, site, dir)
	return err
}

// resend answers a redelivered job whose commit already exists: push it (idempotent) and
// report it, without running the agent again.
func (r *run) resend(ctx context.Context, sha string) (worker.Outcome, error) {
	r.log.InfoContext(ctx, "job already committed; re-sending its result", slog.String("commit", sha))
	r.base = sha + "^"
	if err := r.push(ctx); err != nil {
		return r.outcome(sha), err
	}
	out := r.outcome(sha)
	out.Summary = "Already done (commit " + short(sha) + "); result sent again."
	out.Report.Resent = true
	return out, nil
}

func (r *run) noChanges() worker.Outcome {
	out := r.outcome("")
	out.Report.NoChanges = true
	out.Summary = strings.TrimSpace(out.Summary + "\n\nNo files changed, so nothing was committed.")
	return out
}

// dirty reports whether the agent's work staged anything to commit.
func (r *run) dirty(ctx context.Context) (bool, error) {
	return r.ws.Staged(ctx)
}

// stage times fn as a named stage.
// A stage's failure is of its kind (failure.Of), unless something nearer the cause gave it one.
func (r *run) stage(name string, fn func() error) error {
	start := time.Now()
	err := fn()
	took := time.Since(start)
	r.stages[name] += took.Milliseconds()
	metrics.StageDuration.WithLabelValues(name).Observe(took.Seconds())
	return kinded(stageKinds[name], err)
}

// stageKinds are the failure kinds of the stages whose failures have one.
var stageKinds = map[string]failure.Kind{
	"git": failure.Site, "agent": failure.Agent, "build": failure.Build, "commit": failure.Save, "push": failure.Save,
}

// kinded marks err with kind, or Limit when a process of the job went over one of its limits.
func kinded(kind failure.Kind, err error) error {
	if errors.Is(err, sandbox.ErrLimit) {
		err = failure.Mark(failure.Limit, err)
	}
	return failure.Mark(kind, err)
}

func (r *run) output() io.Writer {
	if r.p.cfg.Live == nil {
		return io.Discard
	}
	return r.p.cfg.Live(r.task.Job.ID)
}

func (r *run) author() workspace.Author {
	email := r.spec.From
	if email == "" {
		email = r.task.Job.Tenant.User + "@" + r.task.Job.Tenant.Project + ".webordinary.invalid"
	}
	return workspace.Author{Name: r.task.Job.Tenant.User, Email: email}
}

func (r *run) trailers() []string {
	return []string{"Command-Id: " + r.task.Job.ID, "Thread-Id: " + r.thread.ID}
}

func (r *run) commitMessage() string {
	msg := firstLine(r.spec.Instruction)
	if s := strings.TrimSpace(r.agentRes.Summary); s != "" {
		msg += "\n\n" + s
	}
	return msg
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if len(line) > 72 {
		line = line[:69] + "..."
	}
	if line == "" {
		line = "Edit"
	}
	return line
}

func short(sha string) string { return sha[:min(len(sha), 10)] }

// outcome reports what the run did so far.
func (r *run) outcome(sha string) worker.Outcome {
	rep := report.Report{Branch: r.thread.Branch, StagesMs: r.stages, Commit: sha,
		DurationMs: time.Since(r.start).Milliseconds(), PreviewURLs: r.deploy.URLs, Continues: r.continues,
		AgentSession: r.agentRes.Session, ModelRetries: r.modelRetries, ModelWait: r.modelWait, Check: r.check,
		LeftOut: leftOutNotes(r.leftOut), EgressDenied: r.egressDenied()}
	u := r.egress.Usage()
	rep.ModelTokensIn, rep.ModelTokensOut = u.InputTokens, u.OutputTokens
	if sha != "" {
		if files, stat, err := r.ws.Changes(context.Background(), r.base, sha); err == nil {
			rep.Files, rep.Diffstat = fileChanges(files), stat
		}
	}
	if a := r.agentRes; a.Duration > 0 || a.Session != "" {
		rep.AgentCostUSD, rep.AgentTurns, rep.AgentDurationMs = a.CostUSD, a.Turns, a.Duration.Milliseconds()
	}
	if r.buildRes.Log != "" && r.buildRes.Duration > 0 {
		rep.BuildLogTail = tailString(r.buildRes.Log, 2000)
	}
	summary := strings.TrimSpace(r.agentRes.Summary)
	if c := r.check; c != nil && c.Changed {
		summary = strings.TrimSpace(summary + "\n\n" + checkedLine(c.Summary))
	}
	if len(rep.LeftOut) > 0 {
		summary = strings.TrimSpace(summary + "\n\nLeft out of the commit: " + strings.Join(rep.LeftOut, "; ") + ".")
	}
	return worker.Outcome{Summary: summary, OutputTail: r.agentRes.OutputTail, Report: rep}
}

// stageLeavingOut stages paths (all changes when none) but exclude, and keeps what staging
// left out for the result.
func (r *run) stageLeavingOut(ctx context.Context, paths, exclude []string) error {
	left, err := r.ws.Stage(ctx, paths, exclude)
	for _, l := range left {
		if !slices.ContainsFunc(r.leftOut, func(o workspace.LeftOut) bool { return o.Path == l.Path }) {
			r.leftOut = append(r.leftOut, l)
		}
	}
	return err
}

func leftOutNotes(left []workspace.LeftOut) []string {
	var notes []string
	for _, l := range left {
		notes = append(notes, l.String())
	}
	return notes
}

// fileChanges converts the workspace's changes to the report's.
func fileChanges(cs []workspace.Change) []report.FileChange {
	out := make([]report.FileChange, len(cs))
	for i, c := range cs {
		out[i] = report.FileChange{Status: c.Status, Path: c.Path}
	}
	return out
}

func tailString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
