package api

import (
	"net/http"

	"github.com/webordinary/webordinary/internal/tenant"
)

// TenantAction is the answer to an operator's tenant action.
type TenantAction struct {
	Tenant string `json:"tenant"`
	// Action is "claim", "release" or "force-release".
	Action string `json:"action"`
	// Took, for force-release, says whether there was a live lease to take.
	Took bool `json:"took,omitempty"`
}

func (s *Server) tenantRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/tenants/{project}/{user}/claim", s.tenantClaim)
	mux.HandleFunc("POST /api/tenants/{project}/{user}/release", s.tenantRelease)
}

// tenantClaim requests a claim for the tenant now.
func (s *Server) tenantClaim(w http.ResponseWriter, r *http.Request) {
	t, ok := pathTenant(w, r)
	if !ok {
		return
	}
	if err := s.Router.Claim(r.Context(), t); err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusAccepted, TenantAction{Tenant: t.String(), Action: "claim"})
}

// tenantRelease asks the tenant's owner to release it after its running job; with
// ?force=1 it takes the lease from the owner at once (Router.ForceRelease).
func (s *Server) tenantRelease(w http.ResponseWriter, r *http.Request) {
	t, ok := pathTenant(w, r)
	if !ok {
		return
	}
	a := TenantAction{Tenant: t.String(), Action: "release"}
	var err error
	if r.URL.Query().Get("force") == "1" {
		a.Action = "force-release"
		a.Took, err = s.Router.ForceRelease(r.Context(), t)
	} else {
		err = s.Router.Release(r.Context(), t, "released by an operator")
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusAccepted, a)
}

func pathTenant(w http.ResponseWriter, r *http.Request) (tenant.ID, bool) {
	t, err := tenant.New(r.PathValue("project"), r.PathValue("user"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error()+" (project and user: lowercase letters, digits and -)")
		return t, false
	}
	return t, true
}
