package api

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/mail/intake"
	"github.com/webordinary/webordinary/internal/router"
)

// Status is the system at one moment.
type Status struct {
	Leases        []LeaseStatus       `json:"leases"`
	Pending       []PendingStatus     `json:"pending"`
	Workers       []broker.WorkerInfo `json:"workers"`
	ClaimsWaiting int                 `json:"claimsWaiting"`
	// Demand is the autoscaling signal (router.Demand) when this process runs the router.
	Demand *router.Demand     `json:"demand,omitempty"`
	Jobs   []broker.JobRecord `json:"recentJobs"`
	// HeldMail are the messages held over a sender's limit (see GET /api/mail/held); absent
	// without an SMTP listener.
	HeldMail []intake.Quarantined `json:"heldMail,omitempty"`
	// ParkedReplies is how many replies could not be sent (see GET /api/mail/replies).
	ParkedReplies int `json:"parkedReplies,omitempty"`
}

// LeaseStatus is one live lease.
type LeaseStatus struct {
	Tenant    string        `json:"tenant"`
	Owner     string        `json:"owner"`
	Token     uint64        `json:"token"`
	Age       time.Duration `json:"age"`
	ExpiresIn time.Duration `json:"expiresIn"`
}

// PendingStatus is one tenant's backlog.
type PendingStatus struct {
	Tenant  string `json:"tenant"`
	Pending int    `json:"pending"`
	Owner   string `json:"owner,omitempty"`
}

// ReadStatus gathers Status from b.
// local, when set, reports this process's workers first-hand (presence lags by a heartbeat).
func ReadStatus(ctx context.Context, b *broker.Backend, recent int, local func() []broker.WorkerInfo) (Status, error) {
	var st Status
	leases, err := b.Leases.List(ctx)
	if err != nil {
		return st, err
	}
	owners := map[string]string{}
	for _, l := range leases {
		owners[l.Tenant.String()] = l.Owner
		st.Leases = append(st.Leases, LeaseStatus{Tenant: l.Tenant.String(), Owner: l.Owner, Token: l.Token,
			Age: time.Since(l.ClaimedAt).Round(time.Millisecond), ExpiresIn: time.Until(l.ExpiresAt).Round(time.Millisecond)})
	}
	pending, err := b.Inbox.Tenants(ctx)
	if err != nil {
		return st, err
	}
	for t, n := range pending {
		st.Pending = append(st.Pending, PendingStatus{Tenant: t.String(), Pending: n, Owner: owners[t.String()]})
	}
	sort.Slice(st.Pending, func(i, j int) bool { return st.Pending[i].Tenant < st.Pending[j].Tenant })
	if st.Workers, err = b.Presence.List(ctx); err != nil {
		return st, err
	}
	st.Workers = mergeWorkers(st.Workers, local)
	sort.Slice(st.Workers, func(i, j int) bool { return st.Workers[i].ID < st.Workers[j].ID })
	if st.ClaimsWaiting, err = b.Claims.Waiting(ctx); err != nil {
		return st, err
	}
	st.Jobs, err = b.Jobs.Recent(ctx, recent)
	for i := range st.Jobs {
		if st.Jobs[i].State == broker.StateQueued && owners[st.Jobs[i].Job.Tenant.String()] != "" {
			st.Jobs[i].State = broker.StateClaimed
		}
	}
	return st, err
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	st, err := ReadStatus(r.Context(), s.Backend, 20, s.LocalWorkers)
	if err == nil && s.Held != nil {
		st.HeldMail, err = s.Held.List()
	}
	if s.Replies != nil {
		st.ParkedReplies = s.Replies.ParkedCount()
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if s.Router != nil {
		d := s.Router.Demand()
		st.Demand = &d
	}
	writeJSON(w, http.StatusOK, st)
}

func mergeWorkers(announced []broker.WorkerInfo, local func() []broker.WorkerInfo) []broker.WorkerInfo {
	if local == nil {
		return announced
	}
	byID := map[string]broker.WorkerInfo{}
	for _, w := range announced {
		byID[w.ID] = w
	}
	for _, w := range local() {
		byID[w.ID] = w
	}
	out := make([]broker.WorkerInfo, 0, len(byID))
	for _, w := range byID {
		out = append(out, w)
	}
	return out
}
