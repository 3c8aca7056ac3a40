package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/mail/intake"
)

// shelf is a page of mail set aside by the SMTP intake, with a release and a remove action:
// the quarantine (mail it could not handle) and the held mail (over a sender's limit).
type shelf struct {
	page, title, what string                               // template and path name, page title, "quarantine"
	list              func() ([]intake.Quarantined, error) // nil: no SMTP listener
	release, remove   func(id string) error
	removed           string // "deleted" or "dropped"
	notFound          error  // the intake's "no such message"
}

// shelfData is what a shelf page shows.
type shelfData struct {
	Enabled  bool
	Messages []intake.Quarantined
	Problem  string
}

// quarantineShelf and heldShelf are the two shelves; their list is nil without a listener.
func (d *Dashboard) quarantineShelf() shelf {
	s := shelf{page: "quarantine", title: "Mail quarantine", what: "quarantine", removed: "deleted",
		notFound: intake.ErrNotQuarantined}
	if q := d.cfg.Quarantine; q != nil {
		s.list, s.release, s.remove = q.Quarantined, q.Release, q.Delete
	}
	return s
}

func (d *Dashboard) heldShelf() shelf {
	s := shelf{page: "held", title: "Held mail", what: "held mail", removed: "dropped", notFound: intake.ErrNotHeld}
	if h := d.cfg.Held; h != nil {
		s.list, s.release, s.remove = h.List, h.Release, h.Delete
	}
	return s
}

// show renders the shelf's page.
func (d *Dashboard) show(s shelf) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		data := shelfData{Enabled: s.list != nil}
		if data.Enabled {
			var err error
			if data.Messages, err = s.list(); err != nil {
				data.Problem = "could not list the " + s.what + ": " + err.Error()
			}
		}
		d.write(w, r, http.StatusOK, s.page, &view{Title: s.title, Nav: s.page, Back: "/" + s.page, Data: data})
	}
}

// onShelf is the handler of the shelf's action op (release or remove) on the message the
// path names; action names it in logs.
func (d *Dashboard) onShelf(s shelf, action string, op func(id string) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		d.act(w, r, action, func(context.Context, *http.Request) (string, error) {
			if s.list == nil {
				return "", fmt.Errorf("%w: no SMTP listener, so no %s", errBadRequest, s.what)
			}
			err := op(r.PathValue("id"))
			if errors.Is(err, s.notFound) {
				return "", fmt.Errorf("%w (already released or %s?): %w", err, s.removed, broker.ErrNotFound)
			}
			return "", err
		})
	}
}
