package preview_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/mem"
	"github.com/webordinary/webordinary/internal/broker/natsjs/natsjstest"
	"github.com/webordinary/webordinary/internal/preview"
	"github.com/webordinary/webordinary/internal/preview/previewtest"
)

// TestEngineConformance runs the target suite against the engine target on real NATS and on
// the in-memory engine; a separate EngineServer with its own cache reads what it deployed.
func TestEngineConformance(t *testing.T) {
	backends := map[string]func(t *testing.T) *broker.Backend{
		"natsjs": func(t *testing.T) *broker.Backend {
			return natsjstest.Start(t, natsjstest.Options{NoSync: true}).Backend
		},
		"mem": func(t *testing.T) *broker.Backend {
			b := mem.New(mem.Config{})
			t.Cleanup(func() { _ = b.Close() })
			return b
		},
	}
	for name, newBackend := range backends {
		t.Run(name, func(t *testing.T) {
			previewtest.Run(t, previewtest.Harness{New: func(t *testing.T) previewtest.Instance {
				return newEngineInstance(t, newBackend(t))
			}})
		})
	}
}

func newEngineInstance(t *testing.T, b *broker.Backend) previewtest.Instance {
	t.Helper()
	ctx := context.Background()
	target, err := preview.NewEngine(ctx, preview.EngineConfig{Backend: b, CacheDir: filepath.Join(t.TempDir(), "worker-cache")})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := preview.NewEngineServer(ctx, preview.EngineServerConfig{Backend: b, CacheDir: filepath.Join(t.TempDir(), "serve-cache")})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return previewtest.Instance{Target: target, Get: func(ctx context.Context, site preview.Site, latest bool, path string) (int, string, error) {
		return get(ctx, ts, site, latest, path)
	}}
}

// TestEngineVersionsReadBack: a kept version is readable by id after later deploys (pictures
// render the version before a deploy).
func TestEngineVersionsReadBack(t *testing.T) {
	t.Parallel()
	b := mem.New(mem.Config{})
	t.Cleanup(func() { _ = b.Close() })
	ctx := t.Context()
	e, err := preview.NewEngine(ctx, preview.EngineConfig{Backend: b, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	site := preview.Site{Project: "acme", Thread: "t1"}
	var ids []string
	for _, body := range []string{"one", "two"} {
		src := t.TempDir()
		if err := os.WriteFile(filepath.Join(src, "index.html"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		dep, err := e.Deploy(ctx, site, src)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, dep.Version)
	}
	v, err := e.Version(ctx, site, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	rec := httptest.NewRecorder()
	v.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if !strings.Contains(rec.Body.String(), "one") {
		t.Fatalf("version %s serves %q", ids[0], rec.Body.String())
	}
	if _, err := e.Version(ctx, site, "99"); err == nil {
		t.Fatal("expected ErrNoVersion for a version never deployed")
	}
}

// TestEngineProductionDeploy: the live site deployed through the engine is what
// <project>.<domain> serves on any serve; before the first production deploy that host is
// not found (never the latest preview), and a production deploy leaves the preview alone.
func TestEngineProductionDeploy(t *testing.T) {
	t.Parallel()
	b := mem.New(mem.Config{})
	t.Cleanup(func() { _ = b.Close() })
	ctx := t.Context()
	e, err := preview.NewEngine(ctx, preview.EngineConfig{Backend: b, CacheDir: t.TempDir(), Port: 8080})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := preview.NewEngineServer(ctx, preview.EngineServerConfig{Backend: b, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	get := func(host string) (int, string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		req.Host = host
		srv.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	write := func(body string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	if _, err := e.Deploy(ctx, preview.Site{Project: "acme", Thread: "t1"}, write("<h1>draft</h1>")); err != nil {
		t.Fatal(err)
	}
	if code, body := get("acme.localhost"); code != 404 {
		t.Fatalf("live host before any production deploy: %d %q, want 404", code, body)
	}
	dep, err := e.DeployProduction(ctx, "acme", write("<h1>live</h1>"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dep.URLs) != 1 || dep.URLs[0] != "http://acme.localhost:8080/" {
		t.Fatalf("live URLs %v", dep.URLs)
	}
	for host, want := range map[string]string{"acme.localhost": "live", "edit.acme.localhost": "draft", "t1.edit.acme.localhost": "draft"} {
		if code, body := get(host); code != 200 || !strings.Contains(body, want) {
			t.Errorf("%s: %d %q, want %q", host, code, body, want)
		}
	}
	if _, err := e.DeployProduction(ctx, "acme", write("<h1>live 2</h1>")); err != nil {
		t.Fatal(err)
	}
	if _, body := get("acme.localhost"); !strings.Contains(body, "live 2") {
		t.Fatalf("second production deploy not live: %q", body)
	}
	if _, err := e.DeployProduction(ctx, "Bad_Name", write("x")); err == nil {
		t.Fatal("an invalid project name was deployed")
	}
}
