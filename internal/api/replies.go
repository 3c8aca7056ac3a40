package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/webordinary/webordinary/internal/mail/outbox"
)

// MailReplies is the reply outbox's parked replies (*outbox.Outbox): replies the relay
// refused for good or that ran out of attempts, kept until an operator acts.
type MailReplies interface {
	// ParkedReplies lists them, oldest first.
	ParkedReplies(ctx context.Context) ([]outbox.Parked, error)
	// Retry queues one again, to be sent now with every attempt available.
	Retry(ctx context.Context, id string) error
	// Drop removes one for good.
	Drop(ctx context.Context, id string) error
	// ParkedCount is how many there are, without reading them (for GET /api/status).
	ParkedCount() int
}

// replyRoutes:
//
//	GET    /api/mail/replies              parked replies (id, messageId, to, subject, attempts, error, ...)
//	POST   /api/mail/replies/{id}/retry   send one again
//	DELETE /api/mail/replies/{id}         drop one for good
func (s *Server) replyRoutes(mux *http.ServeMux) {
	if s.Replies == nil {
		return
	}
	mux.HandleFunc("GET /api/mail/replies", s.replyList)
	mux.HandleFunc("POST /api/mail/replies/{id}/retry", s.replyOp(s.Replies.Retry, "retried"))
	mux.HandleFunc("DELETE /api/mail/replies/{id}", s.replyOp(s.Replies.Drop, "dropped"))
}

func (s *Server) replyList(w http.ResponseWriter, r *http.Request) {
	parked, err := s.Replies.ParkedReplies(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "could not list the parked replies: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, parked)
}

func (s *Server) replyOp(op func(context.Context, string) error, done string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		err := op(r.Context(), id)
		switch {
		case errors.Is(err, outbox.ErrNotParked):
			writeError(w, http.StatusNotFound, err.Error()+" (see GET /api/mail/replies)")
		case err != nil:
			writeError(w, http.StatusInternalServerError, err.Error())
		default:
			writeJSON(w, http.StatusOK, map[string]string{done: id})
		}
	}
}
