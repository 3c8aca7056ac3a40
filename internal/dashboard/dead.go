package dashboard

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/tenant"
)

// deadScan is how many recent jobs the dead-letter page looks through for dead ones.
const deadScan = 500

// deadData is what the dead-letter page shows.
type deadData struct {
	Tenants []deadTenant
	// Checked is how many tenants were looked at.
	Checked int
	// Retried is the id of the job a retry just created, for the notice.
	Retried string
	Problem string
}

type deadTenant struct {
	ID      tenant.ID
	Pending int
	Letters []broker.DeadLetter
}

func (d *Dashboard) dead(w http.ResponseWriter, r *http.Request) {
	data := d.readDead(r.Context())
	if id := r.URL.Query().Get("retried"); broker.IsJobID(id) {
		data.Retried = id
	}
	d.write(w, r, http.StatusOK, "dead", &view{Title: "Dead letters", Nav: "dead", Back: "/dead", Data: data})
}

// readDead lists the dead letters of every tenant with pending jobs or a recent dead job.
func (d *Dashboard) readDead(ctx context.Context) deadData {
	pending, err := d.b.Inbox.Tenants(ctx)
	if err != nil {
		return deadData{Problem: "could not list tenants: " + err.Error()}
	}
	recent, err := d.b.Jobs.Recent(ctx, deadScan)
	if err != nil {
		return deadData{Problem: "could not read recent jobs: " + err.Error()}
	}
	names := map[tenant.ID]bool{}
	for t := range pending {
		names[t] = true
	}
	for _, rec := range recent {
		if rec.State == broker.StateDead {
			names[rec.Job.Tenant] = true
		}
	}
	return d.deadLetters(ctx, names, pending)
}

func (d *Dashboard) deadLetters(ctx context.Context, names map[tenant.ID]bool, pending map[tenant.ID]int) deadData {
	data := deadData{Checked: len(names)}
	for t := range names {
		letters, err := d.b.Inbox.DeadLetters(ctx, t)
		if err != nil {
			data.Problem = fmt.Sprintf("could not read the dead letters of %s: %v", t, err)
			continue
		}
		if len(letters) > 0 {
			data.Tenants = append(data.Tenants, deadTenant{ID: t, Pending: pending[t], Letters: letters})
		}
	}
	slices.SortFunc(data.Tenants, func(a, b deadTenant) int { return cmp.Compare(a.ID.String(), b.ID.String()) })
	return data
}

// retry re-submits a dead letter's job as a new job, then removes the dead letter.
func (d *Dashboard) retry(w http.ResponseWriter, r *http.Request) {
	d.act(w, r, "retry", func(ctx context.Context, r *http.Request) (string, error) {
		t, dl, err := d.findDeadLetter(ctx, r)
		if err != nil {
			return "", err
		}
		rec, err := d.cfg.Router.Submit(ctx, resubmission(dl.Job))
		if err != nil {
			return "", fmt.Errorf("re-submit job %s: %w (the dead letter is kept)", dl.Job.ID, err)
		}
		if err := d.b.Inbox.RemoveDeadLetter(ctx, t, dl.Job.ID); err != nil {
			return "", fmt.Errorf("job %s re-submitted as %s, but removing its dead letter failed: %w", dl.Job.ID, rec.Job.ID, err)
		}
		return "/dead?retried=" + rec.Job.ID, nil
	})
}

// discard removes a dead letter.
func (d *Dashboard) discard(w http.ResponseWriter, r *http.Request) {
	d.act(w, r, "discard", func(ctx context.Context, r *http.Request) (string, error) {
		t, dl, err := d.findDeadLetter(ctx, r)
		if err != nil {
			return "", err
		}
		return "", d.b.Inbox.RemoveDeadLetter(ctx, t, dl.Job.ID)
	})
}

// findDeadLetter finds the dead letter the request's path names.
func (d *Dashboard) findDeadLetter(ctx context.Context, r *http.Request) (tenant.ID, broker.DeadLetter, error) {
	t, err := pathTenant(r)
	if err != nil {
		return t, broker.DeadLetter{}, err
	}
	id := r.PathValue("job")
	letters, err := d.b.Inbox.DeadLetters(ctx, t)
	if err != nil {
		return t, broker.DeadLetter{}, err
	}
	for _, dl := range letters {
		if dl.Job.ID == id {
			return t, dl, nil
		}
	}
	return t, broker.DeadLetter{}, fmt.Errorf("no dead letter for job %q of %s (already retried or discarded?): %w", id, t, broker.ErrNotFound)
}

// resubmission is job as a new request: same tenant, thread, content and email threading.
func resubmission(job broker.Job) router.Request {
	s := jobspec.Of(job)
	return router.Request{Project: job.Tenant.Project, User: job.Tenant.User, Thread: job.Thread,
		Instruction: s.Instruction, RepoURL: s.RepoURL, From: s.From, Subject: s.Subject,
		Attachments: s.Attachments, MessageID: s.MessageID, References: s.References}
}
