package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/webordinary/webordinary/internal/project"
)

// project routes, registered when Server.Projects is set:
//
//	GET    /api/projects       every project
//	PUT    /api/projects/{id}  add or replace a project
//	GET    /api/projects/{id}  one project
//	DELETE /api/projects/{id}  remove a project record
func (s *Server) projectRoutes(mux *http.ServeMux) {
	if s.Projects == nil {
		return
	}
	mux.HandleFunc("GET /api/projects", s.listProjects)
	mux.HandleFunc("PUT /api/projects/{id}", s.putProject)
	mux.HandleFunc("GET /api/projects/{id}", s.getProject)
	mux.HandleFunc("DELETE /api/projects/{id}", s.removeProject)
}

func (s *Server) listProjects(w http.ResponseWriter, r *http.Request) {
	ps, err := s.Projects.List(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, ps)
}

func (s *Server) putProject(w http.ResponseWriter, r *http.Request) {
	var p project.Project
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		writeError(w, http.StatusBadRequest, "project must be JSON: "+err.Error())
		return
	}
	if p.ID == "" {
		p.ID = r.PathValue("id")
	}
	if p.ID != r.PathValue("id") {
		writeError(w, http.StatusBadRequest, "the id in the body differs from the one in the path")
		return
	}
	p, err := s.Projects.Put(r.Context(), p)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) getProject(w http.ResponseWriter, r *http.Request) {
	p, err := s.Projects.Get(r.Context(), r.PathValue("id"))
	if errors.Is(err, project.ErrNotFound) {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *Server) removeProject(w http.ResponseWriter, r *http.Request) {
	err := s.Projects.Remove(r.Context(), r.PathValue("id"))
	if errors.Is(err, project.ErrNotFound) {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"removed": r.PathValue("id")})
}
