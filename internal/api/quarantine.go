package api

import (
	"errors"
	"net/http"

	"github.com/webordinary/webordinary/internal/mail/intake"
)

// MailQuarantine is the SMTP intake's quarantine (*intake.Server).
type MailQuarantine interface {
	Quarantined() ([]intake.Quarantined, error)
	Release(id string) error
	Delete(id string) error
}

// quarantineRoutes:
//
//	GET    /api/mail/quarantine              messages set aside (id, receivedAt, mailFrom, rcpt, size, reason)
//	POST   /api/mail/quarantine/{id}/release put one back in the spool to be handled again
//	DELETE /api/mail/quarantine/{id}         delete one for good
func (s *Server) quarantineRoutes(mux *http.ServeMux) {
	if s.Quarantine == nil {
		return
	}
	mux.HandleFunc("GET /api/mail/quarantine", s.quarantineList)
	mux.HandleFunc("POST /api/mail/quarantine/{id}/release", s.quarantineOp(s.Quarantine.Release, "released"))
	mux.HandleFunc("DELETE /api/mail/quarantine/{id}", s.quarantineOp(s.Quarantine.Delete, "deleted"))
}

func (s *Server) quarantineList(w http.ResponseWriter, r *http.Request) {
	q, err := s.Quarantine.Quarantined()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "could not list the quarantine: "+err.Error())
		return
	}
	if q == nil {
		q = []intake.Quarantined{}
	}
	writeJSON(w, http.StatusOK, q)
}

func (s *Server) quarantineOp(op func(string) error, done string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		err := op(id)
		switch {
		case errors.Is(err, intake.ErrNotQuarantined):
			writeError(w, http.StatusNotFound, err.Error()+" (see GET /api/mail/quarantine)")
		case err != nil:
			writeError(w, http.StatusInternalServerError, err.Error())
		default:
			writeJSON(w, http.StatusOK, map[string]string{done: id})
		}
	}
}
