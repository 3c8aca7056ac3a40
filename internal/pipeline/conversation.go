package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/pipeline/report"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/worker"
)

// interrupted ends a job that was stopped: it commits and pushes what the agent had done (if
// anything), and — when a newer instruction on the thread took over — leaves the thread a
// note of this job's instruction and partial work for that newer job's agent.
func (r *run) interrupted(ctx context.Context) (worker.Outcome, error) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	by := worker.InterruptedBy(context.Cause(ctx))
	sha, err := r.commitPartial(cctx)
	if err != nil {
		r.log.WarnContext(ctx, "commit partial work of an interrupted job", slog.Any("err", err))
	}
	out := r.outcome(sha)
	out.Report.Interrupted, out.Report.InterruptedBy = true, by
	out.Summary = interruptedSummary(by != "", sha != "", r.thread.Branch)
	if by != "" {
		r.handOver(cctx, out.Report.Commit, out.Report.Files)
	}
	return out, worker.ErrInterrupted
}

// commitPartial commits and pushes the interrupted job's work and returns its commit, or ""
// when the job had changed nothing (or was stopped before its branch was checked out).
func (r *run) commitPartial(ctx context.Context) (string, error) {
	if r.base == "" {
		return "", nil
	}
	msg := "Interrupted: " + firstLine(r.spec.Instruction) + "\n\nStopped before it finished; this is the partial work."
	sha, committed, err := r.ws.Commit(ctx, msg, r.author(), r.trailers())
	if err != nil {
		return "", err
	}
	if !committed { // committed earlier in this run (interrupted after the commit), not pushed yet
		if sha, err = r.ws.Head(ctx); err != nil || sha == r.base {
			return "", err
		}
	}
	return sha, r.push(ctx)
}

func interruptedSummary(newer, committed bool, branch string) string {
	who := "The site's operator stopped this instruction"
	if newer {
		who = "A newer message on this thread took over from this instruction"
	}
	if !committed {
		return who + " before anything was changed, so nothing from it was saved."
	}
	s := who + " before it finished. What it had done so far was saved on " + branch
	if newer {
		s += ", and the newer message was told about it"
	}
	return s + "."
}

// handOver records this interrupted job on its thread for the next job's agent.
func (r *run) handOver(ctx context.Context, commit string, files []report.FileChange) {
	ij := project.InterruptedJob{Job: r.task.Job.ID, Instruction: r.spec.Instruction, Commit: commit,
		Summary: strings.TrimSpace(r.agentRes.Summary)}
	for _, f := range files {
		ij.Files = append(ij.Files, f.Status+" "+f.Path)
	}
	_, err := r.p.cfg.Threads.Update(ctx, r.thread.ID, func(t *project.Thread) {
		if !slices.ContainsFunc(t.Interrupted, func(x project.InterruptedJob) bool { return x.Job == ij.Job }) {
			t.Interrupted = append(t.Interrupted, ij)
		}
	})
	if err != nil {
		r.log.WarnContext(ctx, "record the interrupted job on its thread", slog.Any("err", err))
	}
}

// handedOver is the part of the prompt that tells the agent about the thread's interrupted
// instructions, quoted, so that it treats the newest one as the owner's correction.
func (r *run) handedOver() string {
	if len(r.thread.Interrupted) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Before this message the owner sent the instructions below on this email thread. Each was interrupted " +
		"by a newer one before it finished. The owner's newest instruction, at the end, is what to do now; where it " +
		"differs from an earlier one, it is the owner correcting themselves.\n\n")
	for _, ij := range r.thread.Interrupted {
		b.WriteString("Interrupted instruction:\n")
		for _, line := range strings.Split(strings.TrimSpace(ij.Instruction), "\n") {
			b.WriteString("> " + line + "\n")
		}
		b.WriteString(doneSoFar(ij) + "\n\n")
		r.continues = append(r.continues, ij.Job)
	}
	b.WriteString("The owner's newest instruction:\n")
	return b.String()
}

func doneSoFar(ij project.InterruptedJob) string {
	if ij.Commit == "" {
		return "It had changed nothing yet."
	}
	s := fmt.Sprintf("Its partial work is already in the working tree (commit %s): %s.", short(ij.Commit), strings.Join(ij.Files, ", "))
	if ij.Summary != "" {
		s += " Its agent had said: " + ij.Summary
	}
	return s
}

// handedOverDone clears the interrupted jobs this job's agent was told about, once that agent
// has run to its end: a failed or interrupted run leaves them for the next job.
func (r *run) handedOverDone(ctx context.Context) {
	if len(r.continues) == 0 {
		return
	}
	th, err := r.p.cfg.Threads.Update(context.WithoutCancel(ctx), r.thread.ID, func(t *project.Thread) {
		t.Interrupted = slices.DeleteFunc(t.Interrupted, func(x project.InterruptedJob) bool { return slices.Contains(r.continues, x.Job) })
	})
	if err != nil {
		r.log.WarnContext(ctx, "clear the thread's interrupted jobs", slog.Any("err", err))
		return
	}
	r.thread = th
}
