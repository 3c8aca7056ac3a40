package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/mail/outbox"
)

// Replies is the reply outbox's parked replies (*outbox.Outbox): replies the relay refused for
// good or that ran out of attempts.
type Replies interface {
	// ParkedReplies lists them, oldest first.
	ParkedReplies(ctx context.Context) ([]outbox.Parked, error)
	// Retry queues one again, to be sent now.
	Retry(ctx context.Context, id string) error
	// Drop removes one for good.
	Drop(ctx context.Context, id string) error
}

// repliesData is what the replies page shows.
type repliesData struct {
	Enabled bool
	Replies []outbox.Parked
	Problem string
}

// replies renders the parked replies.
func (d *Dashboard) replies(w http.ResponseWriter, r *http.Request) {
	data := repliesData{Enabled: d.cfg.Replies != nil}
	if data.Enabled {
		var err error
		if data.Replies, err = d.cfg.Replies.ParkedReplies(r.Context()); err != nil {
			data.Problem = "could not list the parked replies: " + err.Error()
		}
	}
	d.write(w, r, http.StatusOK, "replies", &view{Title: "Parked replies", Nav: "replies", Back: "/replies", Data: data})
}

// onReply is the handler of an action (Retry or Drop) on the parked reply the path names.
func (d *Dashboard) onReply(action string, op func(Replies, context.Context, string) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		d.act(w, r, action, func(ctx context.Context, r *http.Request) (string, error) {
			if d.cfg.Replies == nil {
				return "", fmt.Errorf("%w: this serve sends no replies", errBadRequest)
			}
			err := op(d.cfg.Replies, ctx, r.PathValue("id"))
			if errors.Is(err, outbox.ErrNotParked) {
				return "", fmt.Errorf("%w (already sent again or dropped?): %w", err, broker.ErrNotFound)
			}
			return "", err
		})
	}
}
