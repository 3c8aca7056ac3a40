package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/webordinary/webordinary/internal/build"
	"github.com/webordinary/webordinary/internal/preview"
	"github.com/webordinary/webordinary/internal/project"
)

// keepBaseline captures what the owner had when the thread started, before its first job's
// agent edits anything, and keeps it as the thread's first preview version
// (preview.Baselines): the live site as it is now, or, for a project never published, the
// default branch's build at the commit the thread starts from. The thread's first deploy then
// reports it as its Previous, so its pictures compare with it: a publish from another thread
// meanwhile changes nothing here. Only for pictures (Config.Shots), once per thread; a
// failure is logged and the pictures go without a before. The error is ctx's cause only.
func (r *run) keepBaseline(ctx context.Context) error {
	keep, ok := r.p.cfg.Preview.(preview.Baselines)
	if r.p.cfg.Shots == nil || !ok || r.thread.Baseline != nil || r.thread.Built != nil {
		return nil
	}
	var b *project.Baseline
	built := false
	err := r.stage("before", func() (err error) {
		b, err = r.captureBaseline(ctx, keep, &built)
		return err
	})
	if built { // the build's by-products are not the agent's work, nor partial work to keep
		clean := context.WithoutCancel(ctx) // also when the job was interrupted meanwhile
		if err := r.stage("git", func() error { return r.ws.Checkout(clean, r.thread.Branch, r.proj.DefaultBranch) }); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if err != nil {
		r.log.WarnContext(ctx, "before: cannot keep the site as the thread starts; pictures without a before", slog.Any("err", err))
		return nil
	}
	if b != nil {
		r.saveThread(ctx, func(t *project.Thread) { t.Baseline = b })
	}
	return nil
}

// captureBaseline deploys the live site, else the build of the checked-out commit, as the
// thread's baseline; built says the site was built in the working tree. Nil: there is nothing
// to keep (the thread has commits of its own and the project was never published).
func (r *run) captureBaseline(ctx context.Context, keep preview.Baselines, built *bool) (*project.Baseline, error) {
	b := &project.Baseline{From: project.BaselineLive, Commit: r.base, Job: r.task.Job.ID}
	dir, cleanup, err := r.liveCopy(ctx)
	if errors.Is(err, preview.ErrNoVersion) {
		if !r.ws.IsAncestor(ctx, r.base, "origin/"+r.proj.DefaultBranch) {
			return nil, nil // not where the thread started: its own commits would show as before
		}
		b.From, *built = project.BaselineBuild, true
		dir, cleanup, err = r.startBuild(ctx)
	}
	if err != nil {
		return nil, err
	}
	defer cleanup()
	dep, err := keep.DeployBaseline(ctx, preview.Site{Project: r.proj.ID, Thread: r.thread.ID}, dir)
	if err != nil {
		return nil, err
	}
	b.Version = dep.Version
	return b, nil
}

// liveCopy writes the project's live site into a fresh directory; ErrNoVersion when there is
// none (never published, or no production target that reads it back).
func (r *run) liveCopy(ctx context.Context) (string, func(), error) {
	prod, _ := r.p.production()
	lv, ok := prod.(preview.LiveVersions)
	if !ok {
		return "", nil, fmt.Errorf("%w: the production target does not read its live site back", preview.ErrNoVersion)
	}
	v, err := lv.LiveVersion(ctx, r.proj.ID)
	if err != nil {
		return "", nil, err
	}
	defer v.Close()
	dir, err := os.MkdirTemp(r.state, "before-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	if err := v.WriteFiles(ctx, dir); err != nil {
		cleanup()
		return "", nil, err
	}
	return dir, cleanup, nil
}

// startBuild builds the checked-out commit (the default branch's, where the thread starts)
// as any job's build, and returns the site's directory. The caller puts the working tree
// back as checked out afterwards.
func (r *run) startBuild(ctx context.Context) (string, func(), error) {
	if err := r.own(); err != nil {
		return "", nil, err
	}
	plan := build.Detect(r.ws.Dir, r.proj.BuildCommand, r.proj.OutputDir)
	res, err := build.Run(ctx, r.ws.Dir, plan, r.buildConfig())
	if err != nil {
		return "", nil, fmt.Errorf("the default branch did not build: %w", err)
	}
	if ms := res.InstallDuration.Milliseconds(); ms > 0 { // the job's install, done here first
		r.stages["install"] += ms
		r.stages["before"] -= ms
	}
	r.buildRes = res
	defer func() { r.buildRes = build.Result{} }() // the job's own build is reported, not this one
	return r.siteDir(ctx)
}
