package dashboard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// errBadRequest marks an action request that names nothing valid.
var errBadRequest = errors.New("bad request")

// actionTimeout bounds one action's calls to the backend.
const actionTimeout = 15 * time.Second

// action is one operator action; it returns where to send the browser afterwards ("" for
// the form's back field).
type action func(ctx context.Context, r *http.Request) (next string, err error)

// act checks the CSRF token, runs do, and answers: 204 to a fetch, a redirect to a form.
func (d *Dashboard) act(w http.ResponseWriter, r *http.Request, name string, do action) {
	ok, fetch := d.checkCSRF(r)
	if !ok {
		http.Error(w, "missing or stale form token: reload the page and try again", http.StatusForbidden)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
	defer cancel()
	next, err := do(ctx, r)
	if err != nil {
		d.actionFailed(w, r, name, err)
		return
	}
	d.log.InfoContext(ctx, "dashboard action", slog.String("action", name), slog.String("path", r.URL.Path))
	if next == "" {
		next = localPath(r.PostFormValue("back"), "/")
	}
	if fetch {
		w.Header().Set("Location", next)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (d *Dashboard) actionFailed(w http.ResponseWriter, r *http.Request, name string, err error) {
	status := http.StatusBadGateway
	switch {
	case errors.Is(err, errBadRequest):
		status = http.StatusBadRequest
	case errors.Is(err, broker.ErrNotFound):
		status = http.StatusNotFound
	default:
		d.log.ErrorContext(r.Context(), "dashboard action failed", slog.String("action", name), slog.Any("err", err))
	}
	d.problem(w, r, status, fmt.Sprintf("%s failed: %v", name, err))
}

// interrupt asks the owner of the job's tenant to stop the job.
func (d *Dashboard) interrupt(w http.ResponseWriter, r *http.Request) {
	d.act(w, r, "interrupt", func(ctx context.Context, r *http.Request) (string, error) {
		id := r.PathValue("id")
		if !broker.IsJobID(id) {
			return "", fmt.Errorf("%w: %q is not a job id", errBadRequest, id)
		}
		return "", d.cfg.Router.Interrupt(ctx, id, "interrupted from the dashboard")
	})
}

// release asks the tenant's owner to release it after its running job.
func (d *Dashboard) release(w http.ResponseWriter, r *http.Request) {
	d.act(w, r, "release", func(ctx context.Context, r *http.Request) (string, error) {
		t, err := pathTenant(r)
		if err != nil {
			return "", err
		}
		return "", d.cfg.Router.Release(ctx, t, "released from the dashboard")
	})
}

// claim requests a claim for a tenant now (one with pending jobs and no owner).
func (d *Dashboard) claim(w http.ResponseWriter, r *http.Request) {
	d.act(w, r, "claim", func(ctx context.Context, r *http.Request) (string, error) {
		t, err := pathTenant(r)
		if err != nil {
			return "", err
		}
		return "", d.cfg.Router.Claim(ctx, t)
	})
}

// forceRelease takes a tenant's lease from its owner at once (a hung worker; Router.ForceRelease).
func (d *Dashboard) forceRelease(w http.ResponseWriter, r *http.Request) {
	d.act(w, r, "force release", func(ctx context.Context, r *http.Request) (string, error) {
		t, err := pathTenant(r)
		if err != nil {
			return "", err
		}
		_, err = d.cfg.Router.ForceRelease(ctx, t)
		return "", err
	})
}

func pathTenant(r *http.Request) (tenant.ID, error) {
	t, err := tenant.New(r.PathValue("project"), r.PathValue("user"))
	if err != nil {
		return t, fmt.Errorf("%w: %w", errBadRequest, err)
	}
	return t, nil
}
