package pipeline

import (
	"context"
	"log/slog"

	"github.com/webordinary/webordinary/internal/preview"
	"github.com/webordinary/webordinary/internal/shots"
)

// takeShots takes the pictures of what the job's deploy changed (see package shots). Whatever
// happens is in the job's shots report and the log; the job goes on.
func (r *run) takeShots(ctx context.Context, sha string) {
	sh := r.p.cfg.Shots
	versions, ok := r.p.cfg.Preview.(preview.Versions)
	if sh == nil || !ok || r.deploy.Version == "" {
		return
	}
	site := preview.Site{Project: r.proj.ID, Thread: r.thread.ID}
	req := shots.Request{JobID: r.task.Job.ID, Warm: r.warm}
	var err error
	if req.After, err = versions.Version(ctx, site, r.deploy.Version); err != nil {
		r.log.WarnContext(ctx, "shots: cannot read the deployed version", slog.Any("err", err))
		return
	}
	defer req.After.Close()
	if prev := r.deploy.Previous; !prev.IsZero() {
		before := preview.Site{Project: site.Project, Thread: prev.Thread}
		if req.Before, err = versions.Version(ctx, before, prev.Version); err == nil {
			defer req.Before.Close()
		} // pruned since: every page counts as new
	}
	if files, _, err := r.ws.Changes(context.WithoutCancel(ctx), r.base, sha); err == nil {
		for _, f := range files {
			req.Sources = append(req.Sources, f.Path)
		}
	}
	_, _ = sh.Shoot(ctx, req) // logged and stored by Shoot
}
