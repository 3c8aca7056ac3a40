// Package api is the HTTP JSON API of `webordinary serve`: submit a job, read or wait for a
// job, and see the system's status.
//
//	POST /api/jobs                 {"project","user","thread","instruction"} → 202 job record
//	GET  /api/jobs/{id}[?wait=30s] job record; with wait, returns when final or at the timeout
//	POST /api/jobs/{id}/interrupt  ask the owner to stop the job
//	GET  /api/status               leases, pending per tenant, workers, recent jobs, held mail, parked replies
//	POST /api/tenants/{p}/{u}/claim    request a claim for the tenant now
//	POST /api/tenants/{p}/{u}/release  ask its owner to release it; ?force=1 takes its lease at once
//	POST /api/mail/inspect         raw message → the mail router's report (422 over the parse budget)
//	GET  /api/mail/quarantine      mail set aside; POST …/{id}/release, DELETE …/{id}
//	GET  /api/mail/held            mail held over a sender's limit; POST …/{id}/release, DELETE …/{id}
//	GET  /api/mail/replies         replies that could not be sent; POST …/{id}/retry, DELETE …/{id}
//	GET  /healthz                  200 when the engine answers
//
// The handler checks no access itself: serve puts it behind the dashboard's Guard (Host
// allowlist, bearer token, cross-origin protection for writes) and /healthz behind GuardHost.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/mail/inbound"
	"github.com/webordinary/webordinary/internal/mail/intake"
	"github.com/webordinary/webordinary/internal/mail/message"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/router"
)

// Server serves the API.
type Server struct {
	Backend *broker.Backend
	Router  *router.Router
	Logger  *slog.Logger
	// LocalWorkers reports this process's workers first-hand; optional.
	LocalWorkers func() []broker.WorkerInfo
	// Projects enables the /api/projects routes; optional.
	Projects *project.Store
	// InspectMail enables POST /api/mail/inspect (raw message in, the router's report out).
	InspectMail func(ctx context.Context, env intake.Envelope, raw []byte) (*inbound.Report, error)
	// Quarantine enables the /api/mail/quarantine routes; optional.
	Quarantine MailQuarantine
	// Held enables the /api/mail/held routes and the held list in /api/status; optional.
	Held MailHeld
	// Replies enables the /api/mail/replies routes (the outbox's parked replies); optional.
	Replies MailReplies
	// RevokeThreadLinks enables POST /api/threads/{id}/revoke-links: every link to the
	// thread's owner page issued so far stops working (inbound.Inbound.RevokeThread); optional.
	RevokeThreadLinks func(ctx context.Context, thread string) error
}

// Handler returns the API's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/jobs", s.submit)
	mux.HandleFunc("GET /api/jobs/{id}", s.job)
	mux.HandleFunc("POST /api/jobs/{id}/interrupt", s.interrupt)
	mux.HandleFunc("GET /api/status", s.status)
	mux.HandleFunc("GET /healthz", s.health)
	s.projectRoutes(mux)
	s.tenantRoutes(mux)
	s.quarantineRoutes(mux)
	s.heldRoutes(mux)
	s.replyRoutes(mux)
	if s.InspectMail != nil {
		mux.HandleFunc("POST /api/mail/inspect", s.inspectMail)
	}
	if s.RevokeThreadLinks != nil {
		mux.HandleFunc("POST /api/threads/{id}/revoke-links", s.revokeThreadLinks)
	}
	return mux
}

func (s *Server) revokeThreadLinks(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	err := s.RevokeThreadLinks(r.Context(), id)
	if errors.Is(err, broker.ErrNotFound) {
		writeError(w, http.StatusNotFound, "no thread "+id+" (thread ids are in each job: webordinary job ID)")
		return
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"revoked": id})
}

const maxBody = 32 << 20

func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	var req router.Request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "request body must be JSON like {\"project\":\"site\",\"user\":\"alice\",\"instruction\":\"...\"}: "+err.Error())
		return
	}
	rec, err := s.Router.Submit(r.Context(), req)
	if errors.Is(err, router.ErrInvalid) {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err != nil {
		s.Logger.ErrorContext(r.Context(), "submit", slog.Any("err", err))
		writeError(w, http.StatusServiceUnavailable, "could not accept the job, nothing was queued; try again: "+err.Error())
		return
	}
	writeJSON(w, http.StatusAccepted, rec)
}

func (s *Server) job(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	rec, err := s.Backend.Jobs.Get(r.Context(), id)
	if errors.Is(err, broker.ErrNotFound) {
		writeError(w, http.StatusNotFound, "no job "+id)
		return
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if wait, ok := waitParam(w, r); ok && wait > 0 && !rec.State.Final() {
		rec = s.waitFinal(r.Context(), id, wait, rec)
	} else if !ok {
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

func waitParam(w http.ResponseWriter, r *http.Request) (time.Duration, bool) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return 0, true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > 10*time.Minute {
		writeError(w, http.StatusBadRequest, "wait must be a duration up to 10m, like 30s")
		return 0, false
	}
	return d, true
}

func (s *Server) waitFinal(ctx context.Context, id string, wait time.Duration, last broker.JobRecord) broker.JobRecord {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	rec, err := s.Backend.Jobs.Wait(ctx, id, func(r broker.JobRecord) bool { return r.State.Final() })
	if err != nil {
		return last
	}
	return rec
}

func (s *Server) interrupt(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	err := s.Router.Interrupt(r.Context(), id, "interrupted by an operator")
	if errors.Is(err, broker.ErrNotFound) {
		writeError(w, http.StatusNotFound, "no job "+id)
		return
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"interrupt": id})
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if _, err := s.Backend.Claims.Waiting(r.Context()); err != nil {
		writeError(w, http.StatusServiceUnavailable, "engine not answering: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

// inspectMail reports what the mail router would decide about a raw message, acting on
// nothing. Query parameters fill the SMTP envelope: ip, helo, mailfrom ("<>" for a null
// reverse-path), rcpt. A message over the parse budget is answered 422 at once.
func (s *Server) inspectMail(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 30<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	q := r.URL.Query()
	env := intake.Envelope{RemoteIP: q.Get("ip"), Helo: q.Get("helo"), MailFrom: q.Get("mailfrom"), ReceivedAt: time.Now()}
	if env.MailFrom == "<>" {
		env.MailFrom, env.NullSender = "", true
	}
	if rcpt := q.Get("rcpt"); rcpt != "" {
		env.Rcpt = []string{rcpt}
	}
	rep, err := s.InspectMail(r.Context(), env, raw)
	if errors.Is(err, message.ErrBudget) {
		writeError(w, http.StatusUnprocessableEntity, "the mail intake would quarantine this message: "+err.Error())
		return
	}
	if rep == nil {
		writeError(w, http.StatusBadRequest, fmt.Sprint(err))
		return
	}
	writeJSON(w, http.StatusOK, rep)
}
