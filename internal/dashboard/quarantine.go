package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/mail/intake"
)

// Quarantine is the SMTP intake's quarantine of messages it could not handle (*intake.Server).
type Quarantine interface {
	// Quarantined lists the messages set aside, oldest first.
	Quarantined() ([]intake.Quarantined, error)
	// Release puts a message back in the spool to be handled again.
	Release(id string) error
	// Delete removes a message for good.
	Delete(id string) error
}

// quarantineData is what the quarantine page shows.
type quarantineData struct {
	Enabled  bool
	Messages []intake.Quarantined
	Problem  string
}

func (d *Dashboard) quarantine(w http.ResponseWriter, r *http.Request) {
	data := quarantineData{Enabled: d.cfg.Quarantine != nil}
	if data.Enabled {
		var err error
		if data.Messages, err = d.cfg.Quarantine.Quarantined(); err != nil {
			data.Problem = "could not list the quarantine: " + err.Error()
		}
	}
	d.write(w, r, http.StatusOK, "quarantine", &view{Title: "Mail quarantine", Nav: "quarantine", Back: "/quarantine", Data: data})
}

// quarantineRelease puts a quarantined message back in the spool.
func (d *Dashboard) quarantineRelease(w http.ResponseWriter, r *http.Request) {
	d.act(w, r, "release mail", func(context.Context, *http.Request) (string, error) {
		return "", d.onQuarantined(r, Quarantine.Release)
	})
}

// quarantineDelete deletes a quarantined message.
func (d *Dashboard) quarantineDelete(w http.ResponseWriter, r *http.Request) {
	d.act(w, r, "delete mail", func(context.Context, *http.Request) (string, error) {
		return "", d.onQuarantined(r, Quarantine.Delete)
	})
}

// onQuarantined applies op to the message the request's path names.
func (d *Dashboard) onQuarantined(r *http.Request, op func(Quarantine, string) error) error {
	if d.cfg.Quarantine == nil {
		return fmt.Errorf("%w: no SMTP listener, so no quarantine", errBadRequest)
	}
	err := op(d.cfg.Quarantine, r.PathValue("id"))
	if errors.Is(err, intake.ErrNotQuarantined) {
		return fmt.Errorf("%w (already released or deleted?): %w", err, broker.ErrNotFound)
	}
	return err
}
