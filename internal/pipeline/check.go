package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/webordinary/webordinary/internal/pipeline/report"
	"github.com/webordinary/webordinary/internal/shots"
)

// lookAgain is the check turn (project.Project.CheckTurn), between the preview deploy and the
// commit: the pictures are taken, the agent looks at them in its session and may fix an
// obvious miss; a fix is rebuilt, redeployed and pictured again, so the commit and the reply
// show the final state. Nothing here fails the job: a failed turn, or a fix that does not
// build, is undone and noted (Report.Check). The error is the job's own: ctx ended.
func (r *run) lookAgain(ctx context.Context) error {
	var rep shots.Report
	r.stage("shots", func() error { rep = r.takeShots(ctx, ""); return nil })
	tree, err := r.ws.IndexTree(ctx)
	if err != nil {
		return r.checkFailed(ctx, "cannot record the work before it: "+err.Error())
	}
	changed, err := r.checkTurn(ctx, rep)
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if err != nil {
		return r.undoCheck(ctx, tree, err.Error())
	}
	if !changed {
		return nil
	}
	return r.applyCheck(ctx, tree)
}

// checkTurn gives the agent the instruction and the after-pictures; changed reports whether
// it changed files (staged, like the first turn's work).
func (r *run) checkTurn(ctx context.Context, rep shots.Report) (changed bool, err error) {
	r.check = &report.Check{}
	dir, pics, err := r.checkPictures(rep)
	defer func() { _ = os.RemoveAll(dir); r.pictures = "" }()
	if err != nil || len(pics) == 0 {
		r.check.Note = strings.TrimSpace("The check turn did not run: no pictures of the change. " + rep.Note)
		if err != nil {
			r.check.Note = "The check turn did not run: " + err.Error()
		}
		r.log.InfoContext(ctx, "check turn skipped", slog.String("why", r.check.Note))
		return false, nil
	}
	r.check.Pictures, r.pictures = len(pics), dir
	if r.beforeTurn, err = r.snapshot(ctx); err != nil {
		return false, err
	}
	first := r.agentRes
	err = r.runAgentStage(ctx, "check", checkPrompt(r.spec.Instruction, pics, rep.Unchanged))
	if r.agentRes.Summary != first.Summary { // the turn said something (mergeAgent keeps the last said)
		r.check.Summary = strings.TrimSpace(r.agentRes.Summary)
	}
	r.agentRes.Summary, r.agentRes.OutputTail = first.Summary, first.OutputTail
	if err != nil {
		return false, err
	}
	after, err := r.snapshot(ctx)
	return err == nil && !sameSnapshot(r.beforeTurn, after), err
}

// applyCheck rebuilds, redeploys and re-takes the pictures after the check turn's fix,
// against the version the owner saw before the job. A fix that does not build is undone.
func (r *run) applyCheck(ctx context.Context, tree string) error {
	r.log.InfoContext(ctx, "check turn changed files; rebuilding", slog.String("summary", r.check.Summary))
	r.warm = r.p.cfg.Shots.Warm(ctx)
	defer r.warm.Close()
	built := r.buildRes
	if err := r.buildWithRepair(ctx); err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		r.buildRes = built // the build that was deployed
		return r.undoCheck(ctx, tree, "its fix did not build: "+firstLine(err.Error()))
	}
	if err := r.task.CheckLease(ctx); err != nil {
		return err
	}
	prev := r.deploy.Previous
	if err := r.stage("deploy", func() error { return r.deployPreview(ctx) }); err != nil {
		return err
	}
	r.deploy.Previous = prev // the pictures compare with what the owner saw, not the first try
	r.stage("shots", func() error { r.takeShots(ctx, ""); return nil })
	r.check.Changed = true
	return nil
}

// undoCheck puts the index and working tree back to tree (the work before the check turn),
// notes why, and goes on: the preview still shows that work.
func (r *run) undoCheck(ctx context.Context, tree, why string) error {
	if err := r.ws.Restore(context.WithoutCancel(ctx), tree); err != nil {
		return fmt.Errorf("undo the check turn: %w", err)
	}
	return r.checkFailed(ctx, why)
}

func (r *run) checkFailed(ctx context.Context, why string) error {
	if r.check == nil {
		r.check = &report.Check{}
	}
	r.check.Changed = false
	r.check.Note = "The check turn did not count: " + why
	r.log.WarnContext(ctx, "check turn failed; the job goes on without it", slog.String("why", why))
	return nil
}

// checkPictures copies the after-pictures into a directory of the tenant's state that the
// agent's jail binds read-only, and returns it with the pictures' descriptions.
func (r *run) checkPictures(rep shots.Report) (string, []checkPicture, error) {
	dir := filepath.Join(r.state, "check")
	if err := os.RemoveAll(dir); err != nil {
		return dir, nil, err
	}
	if len(rep.Pages) == 0 {
		return dir, nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return dir, nil, err
	}
	store := r.p.cfg.Shots.Store()
	var pics []checkPicture
	for _, pg := range rep.Pages {
		for _, pic := range pg.Shots {
			if pic.After == "" {
				continue
			}
			data, err := store.Read(r.task.Job.ID, pic.After)
			if err != nil {
				return dir, nil, err
			}
			path := filepath.Join(dir, pic.After)
			if err := os.WriteFile(path, data, 0o644); err != nil {
				return dir, nil, err
			}
			pics = append(pics, checkPicture{Path: path, Page: pg.Path, Width: pic.Width})
		}
	}
	return dir, pics, nil
}

// checkPicture is one after-picture given to the check turn.
type checkPicture struct{ Path, Page, Width string }

// checkPrompt asks the agent to compare the result with the instruction.
func checkPrompt(instruction string, pics []checkPicture, unchanged []string) string {
	var b strings.Builder
	b.WriteString("The platform built and deployed a preview of your change and took pictures of the changed pages " +
		"(PNG screenshots; read each file to see it):\n")
	for _, p := range pics {
		fmt.Fprintf(&b, "- %s: the page %s at %s width\n", p.Path, p.Page, p.Width)
	}
	if len(unchanged) > 0 {
		b.WriteString("These pages' HTML changed but they look exactly as before: " + strings.Join(unchanged, ", ") + "\n")
	}
	b.WriteString("\nThe owner's instruction was:\n\n" + instruction + "\n\n" +
		"Look at the pictures and compare the result with the instruction. If something asked for is plainly missing " +
		"or wrong, fix it in the files now, changing nothing else, and end with one short sentence for the owner saying " +
		"what you fixed. If the result does what was asked, change nothing and answer that it is fine.")
	return b.String()
}

// checkedLine is the reply's sentence about a check turn that changed something.
func checkedLine(summary string) string {
	if summary == "" {
		return "I looked at the result and fixed something I had missed."
	}
	return "I looked at the result and fixed what I had missed: " + summary
}

// sameSnapshot reports whether two snapshots (see snapshot) are equal.
func sameSnapshot(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for p, h := range a {
		if g, ok := b[p]; !ok || g != h {
			return false
		}
	}
	return true
}
