package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/mail/intake"
)

// Held is the SMTP intake's held mail: messages over a sender's limit (*intake.Held).
type Held interface {
	// List lists the held messages, oldest first.
	List() ([]intake.Quarantined, error)
	// Release runs a held message (the limit does not apply to it again).
	Release(id string) error
	// Delete drops a held message for good.
	Delete(id string) error
}

// heldData is what the held mail page shows.
type heldData struct {
	Enabled  bool
	Messages []intake.Quarantined
	Problem  string
}

func (d *Dashboard) held(w http.ResponseWriter, r *http.Request) {
	data := heldData{Enabled: d.cfg.Held != nil}
	if data.Enabled {
		var err error
		if data.Messages, err = d.cfg.Held.List(); err != nil {
			data.Problem = "could not list the held mail: " + err.Error()
		}
	}
	d.write(w, r, http.StatusOK, "held", &view{Title: "Held mail", Nav: "held", Back: "/held", Data: data})
}

// heldRelease runs a held message.
func (d *Dashboard) heldRelease(w http.ResponseWriter, r *http.Request) {
	d.act(w, r, "release held mail", func(context.Context, *http.Request) (string, error) {
		return "", d.onHeld(r, Held.Release)
	})
}

// heldDrop drops a held message.
func (d *Dashboard) heldDrop(w http.ResponseWriter, r *http.Request) {
	d.act(w, r, "drop held mail", func(context.Context, *http.Request) (string, error) {
		return "", d.onHeld(r, Held.Delete)
	})
}

// onHeld applies op to the held message the request's path names.
func (d *Dashboard) onHeld(r *http.Request, op func(Held, string) error) error {
	if d.cfg.Held == nil {
		return fmt.Errorf("%w: no SMTP listener, so no held mail", errBadRequest)
	}
	err := op(d.cfg.Held, r.PathValue("id"))
	if errors.Is(err, intake.ErrNotHeld) {
		return fmt.Errorf("%w (already released or dropped?): %w", err, broker.ErrNotFound)
	}
	return err
}
