package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/build"
	"github.com/webordinary/webordinary/internal/failure"
	"github.com/webordinary/webordinary/internal/preview"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/worker"
	"github.com/webordinary/webordinary/internal/workspace"
)

// errOwner is a failure whose message is written for the site owner: it says plainly what
// happened and that the live site is unchanged. It is permanent (retrying cannot help).
func errOwner(format string, args ...any) error {
	return ownerError(fmt.Sprintf(format, args...))
}

type ownerError string

func (e ownerError) Error() string { return string(e) }
func (e ownerError) Unwrap() error { return worker.ErrPermanent }

// live is one publish or undo in progress.
type live struct {
	target preview.Production
	before string // the default branch's head before
	after  string // and after the merge or revert
	fresh  bool   // the default branch changed
	// kept is the build to deploy when its tree is the one checked out (the thread's last
	// preview for a publish, what was live before the publish for an undo); served is
	// what was deployed when it was a kept build, and replaced what the live site served
	// before.
	kept, served, replaced *project.Live
}

// production returns the configured production target.
func (p *Pipeline) production() (preview.Production, bool) {
	if p.cfg.Production != nil {
		return p.cfg.Production, true
	}
	prod, ok := p.cfg.Preview.(preview.Production)
	return prod, ok
}

// publishLive merges the thread's branch into the project's default branch, builds the site
// from it, pushes it and deploys it to production.
func (r *run) publishLive(ctx context.Context) (worker.Outcome, error) {
	lv, err := r.startLive(ctx)
	if err != nil {
		return r.outcome(""), err
	}
	if err := r.stage("merge", func() error { return r.mergeThread(ctx, lv) }); err != nil {
		return r.liveFailed(ctx, err)
	}
	if b := r.thread.Built; b != nil {
		lv.kept = &project.Live{Thread: r.thread.ID, Built: *b}
	}
	out, err := r.goLive(ctx, lv)
	if err != nil {
		return out, err
	}
	r.recordPublish(ctx, lv, out.Report.LiveURL)
	out.Summary = "Your changes from this conversation are live at " + out.Report.LiveURL + "."
	if !lv.fresh {
		out.Summary = "Everything from this conversation was already published; the live site at " + out.Report.LiveURL + " is up to date."
	}
	return out, nil
}

// undoLive reverts the thread's last publish with a commit that restores the default
// branch's content from before it, then builds, pushes and deploys that.
func (r *run) undoLive(ctx context.Context) (worker.Outcome, error) {
	lv, err := r.startLive(ctx)
	if err != nil {
		return r.outcome(""), err
	}
	n := len(r.thread.Publishes) - 1
	if n < 0 || (r.thread.Publishes[n].UndoneBy != "" && r.thread.Publishes[n].UndoneBy != r.task.Job.ID) {
		return r.outcome(""), errOwner("There is no publish from this conversation to undo, so nothing changed on the live site.")
	}
	if err := r.stage("revert", func() error { return r.revertPublish(ctx, lv, r.thread.Publishes[n]) }); err != nil {
		return r.liveFailed(ctx, err)
	}
	lv.kept = r.thread.Publishes[n].Replaced
	out, err := r.goLive(ctx, lv)
	if err != nil {
		return out, err
	}
	r.recordUndo(ctx, n)
	out.Summary = "I undid the last publish: the live site at " + out.Report.LiveURL + " is back to how it was before it."
	return out, nil
}

// startLive checks that there is somewhere to publish to and syncs the workspace.
func (r *run) startLive(ctx context.Context) (*live, error) {
	target, ok := r.p.production()
	if !ok {
		return nil, errOwner("This site has no live address set up yet, so nothing was published. The operator has to set one up first.")
	}
	if err := r.stage("git", func() error { return r.ws.Sync(ctx) }); err != nil {
		return nil, err
	}
	return &live{target: target}, nil
}

// liveFailed reports a publish or undo that stopped before anything went live.
func (r *run) liveFailed(ctx context.Context, err error) (worker.Outcome, error) {
	if ctx.Err() != nil {
		return r.outcome(""), context.Cause(ctx)
	}
	return r.outcome(""), err
}

// mergeThread merges the thread's branch into the default branch. On a conflict the agent is
// asked to bring the thread's branch up to date with the default branch first.
func (r *run) mergeThread(ctx context.Context, lv *live) error {
	if err := r.ws.Checkout(ctx, r.thread.Branch, r.proj.DefaultBranch); err != nil {
		return err
	}
	head, err := r.ws.Head(ctx)
	if err != nil {
		return err
	}
	if err := r.checkoutDefault(ctx, lv); err != nil {
		return err
	}
	if r.ws.IsAncestor(ctx, head, lv.before) {
		lv.after = lv.before
		return nil
	}
	err = r.ws.Merge(ctx, head, "Publish "+r.thread.Branch, r.trailers())
	if errors.Is(err, workspace.ErrConflict) {
		if head, err = r.updateThread(ctx, err); err != nil {
			return err
		}
		if err = r.checkoutDefault(ctx, lv); err == nil {
			err = r.ws.Merge(ctx, head, "Publish "+r.thread.Branch, r.trailers())
		}
	}
	if errors.Is(err, workspace.ErrConflict) {
		return errOwner("Your changes conflict with changes made to the live site since this conversation started, "+
			"and they could not be reconciled, so nothing was published; the live site is unchanged. (%v)", err)
	}
	if err != nil {
		return err
	}
	lv.after, err = r.ws.Head(ctx)
	lv.fresh = true
	return err
}

func (r *run) checkoutDefault(ctx context.Context, lv *live) error {
	if err := r.ws.Checkout(ctx, r.proj.DefaultBranch, r.proj.DefaultBranch); err != nil {
		return err
	}
	var err error
	lv.before, err = r.ws.Head(ctx)
	r.base = lv.before
	return err
}

// updateThread merges the default branch into the thread's branch, has the agent resolve the
// conflicts, commits and pushes the result, and returns the thread's new head.
func (r *run) updateThread(ctx context.Context, conflict error) (string, error) {
	r.log.InfoContext(ctx, "publish: conflict; asking the agent to bring the thread up to date", slog.Any("conflict", conflict))
	if err := r.ws.Checkout(ctx, r.thread.Branch, r.proj.DefaultBranch); err != nil {
		return "", err
	}
	r.base, _ = r.ws.Head(ctx)
	paths, err := r.ws.MergeStart(ctx, "origin/"+r.proj.DefaultBranch, "Bring "+r.thread.Branch+" up to date with "+r.proj.DefaultBranch)
	if err != nil || len(paths) == 0 {
		return r.ws.Head(ctx)
	}
	if err := r.own(); err != nil {
		return "", err
	}
	if err := r.runAgent(ctx, conflictPrompt(r.proj.DefaultBranch, paths)); err != nil {
		return "", errOwner("Your changes conflict with changes made to the live site since this conversation started, " +
			"and reconciling them failed, so nothing was published; the live site is unchanged.")
	}
	if left := r.ws.HasMarkers(ctx, paths); len(left) > 0 {
		return "", errOwner("Your changes conflict with changes made to the live site since this conversation started "+
			"(in %s), and they could not be reconciled, so nothing was published; the live site is unchanged.", strings.Join(left, ", "))
	}
	sha, _, err := r.ws.Commit(ctx, "Bring "+r.thread.Branch+" up to date with "+r.proj.DefaultBranch, r.author(), r.trailers())
	if err == nil {
		err = r.push(ctx)
	}
	return sha, err
}

func conflictPrompt(branch string, paths []string) string {
	return "Before this conversation's changes can go live, they must be combined with changes made to the " + branch +
		" branch since. Git stopped on conflicts in these files (marked with <<<<<<< ======= >>>>>>> lines):\n- " +
		strings.Join(paths, "\n- ") + "\n\nResolve every conflict so that both the owner's changes from this conversation and the " +
		"newer changes are kept, and remove all conflict markers. Do not change anything else."
}

// revertPublish restores the default branch's content from before p, as a new commit.
func (r *run) revertPublish(ctx context.Context, lv *live, p project.Publish) error {
	if err := r.checkoutDefault(ctx, lv); err != nil {
		return err
	}
	if found, _ := r.ws.FindTrailer(ctx, "HEAD", "Command-Id", r.task.Job.ID); found != "" {
		lv.after, lv.fresh = found, true // redelivered: already reverted and pushed
		return nil
	}
	if lv.before != p.After {
		return errOwner("Something else was published after this conversation's last publish, so I did not undo it; the live site is unchanged.")
	}
	if err := r.ws.Restore(ctx, p.Before); err != nil {
		return err
	}
	sha, committed, err := r.ws.Commit(ctx, "Undo publish of "+r.thread.Branch+" ("+p.Job+")", r.author(), r.trailers())
	if err != nil {
		return err
	}
	if !committed {
		sha = lv.before
	}
	lv.after, lv.fresh = sha, committed
	return nil
}

// goLive deploys the checked-out default branch to production (the thread's preview when it
// was built from the same tree, else a fresh build) and pushes it, checking the lease before
// each irreversible step.
func (r *run) goLive(ctx context.Context, lv *live) (worker.Outcome, error) {
	lv.replaced = r.p.cfg.Threads.Live(ctx, r.proj.ID)
	dir, cleanup, err := r.liveSite(ctx, lv)
	if err != nil {
		return r.outcome(""), err
	}
	defer cleanup()
	if lv.fresh {
		if err := r.stage("push", func() error { return r.pushDefault(ctx) }); err != nil {
			return r.outcome(""), err
		}
	}
	var dep preview.Deployment
	err = r.stage("deploy", func() error {
		if err := r.task.CheckLease(ctx); err != nil {
			return err
		}
		dep, err = lv.target.DeployProduction(ctx, r.proj.ID, dir)
		return err
	})
	sha := ""
	if lv.fresh {
		sha = lv.after
	}
	out := r.outcome(sha)
	out.Report.PublishedFrom = lv.before
	if err != nil {
		return out, err
	}
	out.Report.LiveURL = dep.URLs[0]
	if err := r.p.cfg.Threads.SetLive(context.WithoutCancel(ctx), r.proj.ID, lv.served); err != nil {
		r.log.WarnContext(ctx, "record what the live site serves", slog.Any("err", err))
	}
	return out, nil
}

// liveSite returns the directory to deploy as the live site: the kept build when the
// checked-out tree is the one it was built from, else the output of a fresh build.
func (r *run) liveSite(ctx context.Context, lv *live) (string, func(), error) {
	if dir, cleanup, ok := r.reusePreview(ctx, lv.kept); ok {
		lv.served = lv.kept
		return dir, cleanup, nil
	}
	plan := build.Detect(r.ws.Dir, r.proj.BuildCommand, r.proj.OutputDir)
	if err := r.own(); err != nil {
		return "", nil, err
	}
	var err error
	r.stage("build", func() error {
		r.buildRes, err = build.Run(ctx, r.ws.Dir, plan, r.buildConfig())
		return err
	})
	r.splitInstall()
	if err != nil {
		if ctx.Err() != nil {
			return "", nil, context.Cause(ctx)
		}
		return "", nil, failure.Mark(failure.Build, errOwner("The site did not build from %s, so nothing was published; the live site is unchanged. (%v)", r.proj.DefaultBranch, err))
	}
	return r.siteDir(ctx)
}

// reusePreview writes the kept preview b into a fresh directory when the checked-out tree
// (the index, which the merge or revert left equal to HEAD) is the tree it was built from.
// Anything that stops it (no kept build, another tree, a pruned version, a store that cannot
// read versions back) means a build instead, never a failed publish or undo.
func (r *run) reusePreview(ctx context.Context, b *project.Live) (string, func(), bool) {
	versions, ok := r.p.cfg.Preview.(preview.Versions)
	if b == nil || !ok {
		return "", nil, false
	}
	if tree, err := r.ws.IndexTree(ctx); err != nil || tree != b.Tree {
		return "", nil, false
	}
	dir, err := os.MkdirTemp(r.state, "live-")
	if err != nil {
		return "", nil, false
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	err = r.stage("promote", func() error {
		v, err := versions.Version(ctx, preview.Site{Project: r.proj.ID, Thread: b.Thread}, b.Version)
		if err != nil {
			return err
		}
		defer v.Close()
		return v.WriteFiles(ctx, dir)
	})
	if err != nil {
		cleanup()
		r.log.InfoContext(ctx, "publish: building instead of reusing the preview", slog.String("version", b.Version), slog.Any("err", err))
		return "", nil, false
	}
	return dir, cleanup, true
}

func (r *run) pushDefault(ctx context.Context) error {
	if err := r.task.CheckLease(ctx); err != nil {
		return err
	}
	return r.ws.Push(ctx, r.proj.DefaultBranch)
}

// recordPublish remembers a publish that changed the default branch on the thread, for undo.
func (r *run) recordPublish(ctx context.Context, lv *live, url string) {
	if !lv.fresh {
		return
	}
	p := project.Publish{Job: r.task.Job.ID, Before: lv.before, After: lv.after, URL: url, At: time.Now().UTC(), Replaced: lv.replaced}
	r.saveThread(ctx, func(t *project.Thread) {
		for _, x := range t.Publishes {
			if x.Job == p.Job {
				return
			}
		}
		t.Publishes = append(t.Publishes, p)
	})
}

// recordBuilt remembers the preview this job deployed and the tree it committed, so that a
// publish of that tree can deploy the preview as it is.
func (r *run) recordBuilt(ctx context.Context) {
	if r.deploy.Version == "" {
		return
	}
	tree, err := r.ws.IndexTree(ctx)
	if err != nil {
		return
	}
	b := project.Built{Tree: tree, Version: r.deploy.Version, Job: r.task.Job.ID}
	r.saveThread(ctx, func(t *project.Thread) { t.Built = &b })
}

// recordUndo marks publish n as undone by this job.
func (r *run) recordUndo(ctx context.Context, n int) {
	r.saveThread(ctx, func(t *project.Thread) {
		if n < len(t.Publishes) {
			t.Publishes[n].UndoneBy = r.task.Job.ID
		}
	})
}

func (r *run) saveThread(ctx context.Context, fn func(*project.Thread)) {
	th, err := r.p.cfg.Threads.Update(context.WithoutCancel(ctx), r.thread.ID, fn)
	if err != nil {
		r.log.WarnContext(ctx, "record the publish on the thread", slog.Any("err", err))
		return
	}
	r.thread = th
}
