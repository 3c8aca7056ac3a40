package intake

import (
	"context"
	"errors"
	"log/slog"

	"github.com/webordinary/webordinary/internal/metrics"
)

// ErrHold, wrapped by a Handler's error, says the message may not run now (its sender is over
// a limit): it is held in <spool>/held/ — durable, listed, not handled again by itself — until
// an operator releases it (it is then handled with Envelope.Released set) or drops it. The
// messages after it go on.
var ErrHold = errors.New("message held")

// ErrNotHeld is returned by Held's Release and Delete for an id that is not held.
var ErrNotHeld = errors.New("no such held message")

// heldDir is the spool's subdirectory of held messages: <id>.eml, <id>.json and <id>.reason.
const heldDir = "held"

// Held is the intake's shelf of held messages. Safe for concurrent use.
type Held struct{ s *Server }

// Held returns the shelf of held messages.
func (s *Server) Held() *Held { return &Held{s: s} }

// List lists the held messages, oldest first.
func (h *Held) List() ([]Quarantined, error) { return h.s.spool.shelved(heldDir) }

// Release puts a held message back in the spool, in its place by arrival, marked
// Envelope.Released, and wakes the handling loop.
func (h *Held) Release(id string) error {
	err := h.s.spool.unshelve(heldDir, id, ErrNotHeld, func(env *Envelope) { env.Released = true })
	if err != nil {
		return err
	}
	h.s.accepted()
	return nil
}

// Delete drops a held message for good.
func (h *Held) Delete(id string) error { return h.s.spool.deleteShelved(heldDir, id, ErrNotHeld) }

// hold moves a message to the held shelf; false when it could not be moved (it then holds back
// the later ones, as any failure does).
func (s *Server) hold(ctx context.Context, id, reason string) bool {
	if err := s.spool.shelve(heldDir, id, reason); err != nil {
		s.cfg.Logger.ErrorContext(ctx, "hold mail", slog.String("spool", id), slog.Any("err", err))
		return false
	}
	metrics.MailHeld.Inc()
	s.cfg.Logger.InfoContext(ctx, "mail held", slog.String("spool", id), slog.String("reason", reason))
	return true
}
