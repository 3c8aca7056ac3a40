package api

import (
	"errors"
	"net/http"

	"github.com/webordinary/webordinary/internal/mail/intake"
)

// MailHeld is the SMTP intake's held mail (*intake.Held): messages over a sender's limit,
// kept until an operator releases or drops them.
type MailHeld interface {
	// List lists the held messages, oldest first.
	List() ([]intake.Quarantined, error)
	// Release puts one back in the spool to run (the limit does not apply to it again).
	Release(id string) error
	// Delete drops one for good.
	Delete(id string) error
}

// heldRoutes:
//
//	GET    /api/mail/held              messages held over a limit (id, receivedAt, from, subject, reason, ...)
//	POST   /api/mail/held/{id}/release run one (the limit does not apply to it again)
//	DELETE /api/mail/held/{id}         drop one for good
func (s *Server) heldRoutes(mux *http.ServeMux) {
	if s.Held == nil {
		return
	}
	mux.HandleFunc("GET /api/mail/held", s.heldList)
	mux.HandleFunc("POST /api/mail/held/{id}/release", s.heldOp(s.Held.Release, "released"))
	mux.HandleFunc("DELETE /api/mail/held/{id}", s.heldOp(s.Held.Delete, "dropped"))
}

func (s *Server) heldList(w http.ResponseWriter, r *http.Request) {
	held, err := s.Held.List()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "could not list the held mail: "+err.Error())
		return
	}
	if held == nil {
		held = []intake.Quarantined{}
	}
	writeJSON(w, http.StatusOK, held)
}

func (s *Server) heldOp(op func(string) error, done string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		err := op(id)
		switch {
		case errors.Is(err, intake.ErrNotHeld):
			writeError(w, http.StatusNotFound, err.Error()+" (see GET /api/mail/held)")
		case err != nil:
			writeError(w, http.StatusInternalServerError, err.Error())
		default:
			writeJSON(w, http.StatusOK, map[string]string{done: id})
		}
	}
}
