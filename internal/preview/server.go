package preview

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/webordinary/webordinary/internal/tenant"
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Root is the directory a Dir deploys into (DirConfig.Root). Required.
	Root string
	// Domain is the host suffix that names previews: edit.<project>.<Domain> and
	// <thread>.edit.<project>.<Domain>, with or without a port. Default "localhost".
	Domain string
	// Logger receives unexpected I/O errors (not 404s). Default: discard.
	Logger *slog.Logger
}

func (c ServerConfig) withDefaults() ServerConfig {
	c.Domain = strings.Trim(strings.ToLower(c.Domain), ".")
	if c.Domain == "" {
		c.Domain = "localhost"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c ServerConfig) validate() error {
	if c.Root == "" {
		return errors.New("preview server: Root is required: the directory previews are deployed to")
	}
	return nil
}

// Server is an http.Handler that serves the previews under a root by Host header. It serves
// GET and HEAD only, never lists directories, and never reads outside the version it resolved
// (neither via ".." nor via symlinks). Every response carries Cache-Control: no-cache. Safe for
// concurrent use; it keeps no state between requests.
type Server struct {
	cfg    ServerConfig
	layout layout
	cache  *manifestCache
}

var _ http.Handler = (*Server)(nil)

// NewServer validates cfg. The root need not exist yet: unknown previews answer 404.
func NewServer(cfg ServerConfig) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, layout: layout{root: cfg.Root}, cache: newManifestCache(64)}, nil
}

// ServeHTTP resolves the preview named by r.Host to one version, once, and serves r.URL.Path
// from it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed: previews are read-only", http.StatusMethodNotAllowed)
		return
	}
	p, err := s.previewFor(r.Host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	s.serve(w, r, p)
}

// preview is the site a request names: a thread's, or (thread == "") a project's latest, or
// (live) the project's production site.
type preview struct {
	project, thread string
	live            bool
}

// link returns the symlink naming the preview's live version.
func (s *Server) link(p preview) string {
	if p.live {
		return s.layout.current(Site{Project: p.project, Thread: liveSlot})
	}
	if p.thread == "" {
		return s.layout.latest(p.project)
	}
	return s.layout.current(Site{Project: p.project, Thread: p.thread})
}

// missing explains a preview that has no version yet.
func (p preview) missing() string {
	if p.live {
		return fmt.Sprintf("project %q is not live yet: its site appears here after its first publish", p.project)
	}
	if p.thread == "" {
		return fmt.Sprintf("no preview for project %q yet: it appears after the project's first deploy", p.project)
	}
	return fmt.Sprintf("no preview for thread %q of project %q yet: it appears after the thread's first deploy", p.thread, p.project)
}

// previewFor parses a Host header: <project>.<domain> (the live site), edit.<project>.<domain>
// or <thread>.edit.<project>.<domain>.
func (s *Server) previewFor(host string) (preview, error) { return parseHost(host, s.cfg.Domain) }

// parseHost is previewFor with the domain given.
func parseHost(host, domain string) (preview, error) {
	name := strings.TrimSuffix(strings.ToLower(stripPort(host)), ".")
	rest, ok := strings.CutSuffix(name, "."+domain)
	labels := strings.Split(rest, ".")
	var p preview
	switch {
	case ok && len(labels) == 1:
		p = preview{project: labels[0], live: true}
	case ok && len(labels) == 2 && labels[0] == "edit":
		p = preview{project: labels[1]}
	case ok && len(labels) == 3 && labels[1] == "edit":
		p = preview{project: labels[2], thread: labels[0]}
	default:
		return preview{}, fmt.Errorf("no preview at host %q: use edit.<project>.%s for a project's latest preview or <thread>.edit.<project>.%s for a thread's", host, domain, domain)
	}
	if err := p.validate(); err != nil {
		return preview{}, fmt.Errorf("no preview at host %q: %w", host, err)
	}
	return p, nil
}

// validate checks the names; the error matches tenant.ErrInvalid.
func (p preview) validate() error {
	if err := tenant.ValidatePart("project", p.project); err != nil || p.thread == "" {
		return err
	}
	return tenant.ValidatePart("thread", p.thread)
}

// stripPort removes a ":port" from a Host header, if any.
func stripPort(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return host
}

// serve resolves the preview's live version once and serves the request from it. If the
// version is pruned before its file is opened (a request spanning several deploys), it
// resolves again: a response still comes from one version.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, p preview) {
	link := s.link(p)
	for range 3 {
		target, err := resolveLink(link)
		if errors.Is(err, fs.ErrNotExist) {
			http.Error(w, p.missing(), http.StatusNotFound)
			return
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if s.serveVersion(w, r, link, target) {
			return
		}
	}
	http.Error(w, "the preview changed too often to serve this request; reload", http.StatusServiceUnavailable)
}

// serveVersion serves r from the version whose manifest link pointed at. It returns false,
// having written nothing, when that version has been pruned since.
func (s *Server) serveVersion(w http.ResponseWriter, r *http.Request, link, manifestPath string) bool {
	v, blobs, err := s.open(manifestPath)
	if err == nil {
		defer blobs.Close()
		err = v.serve(w, r)
	}
	if err == nil {
		return true
	}
	if s.moved(link, manifestPath) {
		return false
	}
	s.fail(w, r, err)
	return true
}

// open loads a version: its manifest (cached) and its thread's blob store (close it).
func (s *Server) open(manifestPath string) (version, *os.Root, error) {
	m, err := s.cache.load(manifestPath)
	if err != nil {
		return version{}, nil, err
	}
	blobs, err := os.OpenRoot(filepath.Join(threadDirOf(manifestPath), blobsDir))
	if err != nil {
		return version{}, nil, err
	}
	n, _ := versionOf(manifestPath)
	return version{man: m, blobs: rootBlobs(blobs), thread: filepath.Base(threadDirOf(manifestPath)), id: strconv.Itoa(n)}, blobs, nil
}

// moved reports whether link no longer points at target.
func (s *Server) moved(link, target string) bool {
	now, err := resolveLink(link)
	return err != nil || now != target
}

// fail answers 500 for an unexpected error and logs it.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	s.cfg.Logger.WarnContext(r.Context(), "preview: serve failed", slog.String("host", r.Host),
		slog.String("path", r.URL.Path), slog.Any("error", err))
	http.Error(w, "preview unavailable", http.StatusInternalServerError)
}
