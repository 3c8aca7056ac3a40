package preview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/webordinary/webordinary/internal/broker"
)

// EngineServerConfig configures an EngineServer.
type EngineServerConfig struct {
	// Backend is the engine an Engine target deploys to. Required.
	Backend *broker.Backend
	// CacheDir keeps the blobs served, by hash (never stale: content-addressed). Required.
	CacheDir string
	// CacheMax bounds CacheDir in bytes: past it, the blobs used least recently are removed
	// (fetched again when asked for). Default DefaultCacheMax.
	CacheMax int64
	// Domain is the host suffix, as in ServerConfig. Default "localhost".
	Domain string
	// Logger receives unexpected errors (not 404s). Default: discard.
	Logger *slog.Logger
}

// EngineServer is an http.Handler that serves the previews an Engine target deployed, by Host
// header, like Server: each request reads the pointer (one KV read), then the manifest
// (cached in memory by hash) and the file (cached on disk by hash, fetched on first use).
type EngineServer struct {
	cfg      EngineServerConfig
	pointers broker.Table
	blobs    broker.Blobs
	cache    *blobCache

	mu        sync.Mutex
	manifests map[string]manifest // by hash; immutable
}

var _ http.Handler = (*EngineServer)(nil)

// NewEngineServer opens the engine's preview store.
func NewEngineServer(ctx context.Context, cfg EngineServerConfig) (*EngineServer, error) {
	cfg.Domain = strings.Trim(strings.ToLower(cfg.Domain), ".")
	if cfg.Domain == "" {
		cfg.Domain = "localhost"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	blobs, pointers, err := openEngineStore(ctx, cfg.Backend)
	if err != nil {
		return nil, err
	}
	cache, err := newBlobCache(cfg.CacheDir, blobs, cfg.CacheMax)
	if err != nil {
		return nil, err
	}
	return &EngineServer{cfg: cfg, pointers: pointers, blobs: blobs, cache: cache, manifests: map[string]manifest{}}, nil
}

// ServeHTTP resolves the preview named by r.Host to one version and serves r.URL.Path from it.
func (s *EngineServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed: previews are read-only", http.StatusMethodNotAllowed)
		return
	}
	p, err := parseHost(r.Host, s.cfg.Domain)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	v, err := s.resolve(r.Context(), p)
	if errors.Is(err, broker.ErrNotFound) {
		http.Error(w, p.missing(), http.StatusNotFound)
		return
	}
	if err == nil {
		err = v.serve(w, r)
	}
	if err != nil {
		s.cfg.Logger.WarnContext(r.Context(), "preview: serve from the engine failed", slog.String("host", r.Host),
			slog.String("path", r.URL.Path), slog.Any("error", err))
		http.Error(w, "preview unavailable", http.StatusInternalServerError)
	}
}

// resolve reads the preview's pointer and its manifest.
func (s *EngineServer) resolve(ctx context.Context, p preview) (version, error) {
	key, thread := p.project, p.thread
	switch {
	case p.live:
		key, thread = threadKey(Site{Project: p.project, Thread: liveSlot}), liveSlot
	case thread != "":
		key = p.project + "." + thread
	}
	raw, _, err := s.pointers.Get(ctx, key)
	if err != nil {
		return version{}, err
	}
	var ptr latestPointer // a thread pointer decodes into the same fields
	if err := json.Unmarshal(raw, &ptr); err != nil {
		return version{}, fmt.Errorf("pointer %s: %w", key, err)
	}
	if thread == "" {
		thread = ptr.Thread
	}
	m, err := s.manifest(ctx, ptr.Manifest)
	return version{man: m, blobs: s.cache.open, thread: thread, id: strconv.Itoa(ptr.Version)}, err
}

func (s *EngineServer) manifest(ctx context.Context, sum string) (manifest, error) {
	s.mu.Lock()
	m, ok := s.manifests[sum]
	s.mu.Unlock()
	if ok {
		return m, nil
	}
	m, err := loadEngineManifest(ctx, s.blobs, sum)
	if err != nil {
		return manifest{}, err
	}
	s.mu.Lock()
	if len(s.manifests) >= 256 {
		clear(s.manifests)
	}
	s.manifests[sum] = m
	s.mu.Unlock()
	return m, nil
}
