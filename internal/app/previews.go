package app

import (
	"context"
	"net/http"
	"path/filepath"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/preview"
)

// PreviewsEngine as Worker.Previews deploys previews into the engine's blob store (see
// preview.Engine) instead of a directory: serve's preview server reads them from there, so
// workers need no mount shared with serve.
const PreviewsEngine = "engine"

// previewCache is where a process keeps the preview blobs it read from the engine.
func (a *App) previewCache() string { return filepath.Join(a.cfg.Data, "preview-cache") }

// previewTarget is where this process's pipeline deploys: S3 (Worker.PreviewTarget), the
// engine or a directory.
func (a *App) previewTarget(ctx context.Context, b *broker.Backend, port int) (preview.Target, error) {
	w := a.cfg.Worker
	if w.PreviewTarget != "" {
		return a.s3Previews(ctx, port)
	}
	if w.Previews == PreviewsEngine {
		return preview.NewEngine(ctx, preview.EngineConfig{Backend: b, CacheDir: a.previewCache(), CacheMax: w.PreviewCacheMaxBytes, Port: port,
			Domain: w.PreviewDomain, Logger: a.log})
	}
	return preview.NewDir(preview.DirConfig{Root: w.Previews, Port: port, Domain: w.PreviewDomain, Logger: a.log})
}

// previewHandler is serve's preview server: from Worker.PreviewTarget's bucket (previews,
// live sites and production hosts), from the engine, or from the directory.
func (a *App) previewHandler(ctx context.Context, b *broker.Backend) (http.Handler, error) {
	w := a.cfg.Worker
	if w.PreviewTarget != "" {
		store, err := a.s3Previews(ctx, a.previewPort())
		if err != nil {
			return nil, err
		}
		return store.Server(true), nil
	}
	if w.Previews == PreviewsEngine {
		return preview.NewEngineServer(ctx, preview.EngineServerConfig{Backend: b, CacheDir: a.previewCache(), CacheMax: w.PreviewCacheMaxBytes,
			Domain: w.PreviewDomain, Logger: a.log})
	}
	return preview.NewServer(preview.ServerConfig{Root: w.Previews, Domain: w.PreviewDomain, Logger: a.log})
}
