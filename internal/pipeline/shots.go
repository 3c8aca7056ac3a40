package pipeline

import (
	"context"
	"log/slog"

	"github.com/webordinary/webordinary/internal/preview"
	"github.com/webordinary/webordinary/internal/shots"
)

// takeShots takes the pictures of what the job's deploy changed (see package shots). Whatever
// happens is in the job's shots report (also returned) and the log; the job goes on.
func (r *run) takeShots(ctx context.Context, sha string) shots.Report {
	sh := r.p.cfg.Shots
	versions, ok := r.p.cfg.Preview.(preview.Versions)
	if sh == nil || !ok || r.deploy.Version == "" {
		return shots.Report{Note: "No pictures: the server takes none here."}
	}
	site := preview.Site{Project: r.proj.ID, Thread: r.thread.ID}
	req := shots.Request{JobID: r.task.Job.ID, Warm: r.warm}
	var err error
	if req.After, err = versions.Version(ctx, site, r.deploy.Version); err != nil {
		r.log.WarnContext(ctx, "shots: cannot read the deployed version", slog.Any("err", err))
		return shots.Report{Note: "No pictures: " + err.Error()}
	}
	defer req.After.Close()
	if req.Before = r.before(ctx, versions, site); req.Before != nil {
		defer req.Before.Close()
	}
	req.Sources = r.sources(ctx, sha)
	rep, _ := sh.Shoot(ctx, req) // logged and stored by Shoot
	return rep
}

// before is the version the owner had before the job: the thread's own previous preview,
// which for the thread's first deploy is its baseline (see keepBaseline: the live site or the
// default branch's build as the thread started). Never another thread's preview (the
// project's latest): it holds changes this owner never asked for; nor the live site as it is
// now: a publish since the thread started would show as this owner's change. Nil when there
// is none (no baseline could be kept, or the version was pruned since): pictures then go
// without a before.
func (r *run) before(ctx context.Context, versions preview.Versions, site preview.Site) *preview.Version {
	prev := r.deploy.Previous
	if prev.IsZero() || prev.Thread != r.thread.ID {
		return nil
	}
	v, err := versions.Version(ctx, site, prev.Version)
	if err != nil {
		r.log.InfoContext(ctx, "shots: cannot read the version before; pictures without a before", slog.Any("err", err))
		return nil
	}
	return v
}

// sources are the repository paths the job changed: in its commit sha, or — before the
// commit ("") — in the working tree.
func (r *run) sources(ctx context.Context, sha string) []string {
	ctx = context.WithoutCancel(ctx)
	if sha == "" {
		paths, _ := r.ws.Status(ctx)
		return paths
	}
	files, _, err := r.ws.Changes(ctx, r.base, sha)
	if err != nil {
		return nil
	}
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.Path
	}
	return out
}
