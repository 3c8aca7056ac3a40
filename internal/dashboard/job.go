package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/pipeline/report"
	"github.com/webordinary/webordinary/internal/shots"
)

// jobData is what a job page shows.
type jobData struct {
	Rec     broker.JobRecord
	Details details
	// Owner is the tenant's owner while the job waits (it is next in that owner's queue).
	Owner string
	// ShowOutput shows the output panel; Output fills it for a final job (a running job's
	// output streams in).
	ShowOutput bool
	Output     []string
	// Pictures are the pictures of a finished job's change; nil when there are none.
	Pictures *shots.Report
}

// step is one entry of the job's timeline.
type step struct {
	Name string
	At   time.Time
	Note string
	// Class is "done", "now", "todo" or "bad".
	Class string
}

// Running reports whether the job can be interrupted.
func (j jobData) Running() bool { return j.Rec.State == broker.StateRunning }

// Steps is the job's timeline: accepted → started → finished.
func (j jobData) Steps() []step {
	rec := j.Rec
	return []step{
		{Name: "Accepted", At: rec.Job.AcceptedAt, Class: "done", Note: "thread " + rec.Job.Thread},
		j.startStep(),
		j.finishStep(),
	}
}

func (j jobData) startStep() step {
	rec := j.Rec
	s := step{Name: "Started", At: rec.StartedAt, Class: "done"}
	switch {
	case rec.StartedAt.IsZero() && j.Owner != "":
		s.Class, s.Note = "todo", "the tenant is owned by "+j.Owner+"; this job is in its queue"
	case rec.StartedAt.IsZero():
		s.Class, s.Note = "todo", "waiting for a worker to claim the tenant"
	default:
		s.Note = fmt.Sprintf("attempt %d on %s, lease token #%d", rec.Attempts, rec.Worker, rec.LeaseToken)
		if rec.State == broker.StateRunning {
			s.Class = "now"
		}
	}
	return s
}

func (j jobData) finishStep() step {
	rec := j.Rec
	if !rec.State.Final() {
		return step{Name: "Finished", Class: "todo"}
	}
	s := step{Name: "Finished", At: rec.FinishedAt, Class: "done",
		Note: fmt.Sprintf("%s after %s", rec.State, compactDuration(ran(rec)))}
	if rec.State != broker.StateDone {
		s.Class = "bad"
	}
	return s
}

// loadJob reads the job and, while it waits, its tenant's owner.
func (d *Dashboard) loadJob(ctx context.Context, id string) (jobData, error) {
	rec, err := d.b.Jobs.Get(ctx, id)
	if err != nil {
		return jobData{}, err
	}
	j := jobData{Rec: rec}
	if rec.Result != nil {
		j.Details = details{report.Of(*rec.Result)}
	}
	if rec.State.Final() {
		j.Pictures = d.pictures(id)
	}
	if rec.State == broker.StateQueued || rec.State == broker.StateClaimed {
		if l, err := d.b.Leases.Get(ctx, rec.Job.Tenant); err == nil {
			j.Owner, j.Rec.State = l.Owner, broker.StateClaimed
		}
	}
	return j, nil
}

// withOutput fills the output panel of a final job from the hub, or from the result's tail.
func (d *Dashboard) withOutput(j jobData) jobData {
	j.ShowOutput = d.cfg.Live != nil
	if !j.Rec.State.Final() {
		return j
	}
	if d.cfg.Live != nil {
		j.Output = d.cfg.Live.Lines(j.Rec.Job.ID)
	}
	if len(j.Output) == 0 && j.Rec.Result != nil && j.Rec.Result.OutputTail != "" {
		j.Output = strings.Split(strings.TrimRight(j.Rec.Result.OutputTail, "\n"), "\n")
	}
	j.ShowOutput = j.ShowOutput || len(j.Output) > 0
	return j
}

func (d *Dashboard) job(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	j, err := d.jobOr404(w, r, id)
	if err != nil {
		return
	}
	v := &view{Title: "Job " + id, Nav: "overview", Back: "/jobs/" + id, Data: d.withOutput(j)}
	if !j.Rec.State.Final() {
		v.Events = "/jobs/" + id + "/events"
	}
	d.write(w, r, http.StatusOK, "job", v)
}

// jobOr404 loads the job or answers with the reason it cannot be shown.
func (d *Dashboard) jobOr404(w http.ResponseWriter, r *http.Request, id string) (jobData, error) {
	if !broker.IsJobID(id) {
		d.problem(w, r, http.StatusNotFound, fmt.Sprintf("%q is not a job id (j followed by 28 hex digits, or 24 for older jobs).", id))
		return jobData{}, broker.ErrNotFound
	}
	j, err := d.loadJob(r.Context(), id)
	switch {
	case errors.Is(err, broker.ErrNotFound):
		d.problem(w, r, http.StatusNotFound, "No job "+id+": it never existed or its record has expired.")
	case err != nil:
		d.problem(w, r, http.StatusServiceUnavailable, "Could not read job "+id+": "+err.Error())
	}
	return j, err
}

// jobSections renders the parts of a job page that change, by element id.
func (d *Dashboard) jobSections(ctx context.Context, id string) (map[string]string, bool, error) {
	j, err := d.loadJob(ctx, id)
	if err != nil {
		return nil, false, err
	}
	v := &view{CSRF: d.csrf, Back: "/jobs/" + id, Data: j}
	out := map[string]string{}
	for _, part := range []string{"job-state", "job-result"} {
		if out[part], err = d.pages.render("job", part, v); err != nil {
			return nil, false, err
		}
	}
	return out, j.Rec.State.Final(), nil
}
