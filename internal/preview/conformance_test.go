package preview_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/webordinary/webordinary/internal/preview"
	"github.com/webordinary/webordinary/internal/preview/previewtest"
)

func TestConformance(t *testing.T) { previewtest.Run(t, previewtest.Harness{New: newDirInstance}) }

// newDirInstance is a Dir read back through a Server on a loopback listener.
func newDirInstance(t *testing.T) previewtest.Instance {
	root := t.TempDir()
	target, err := preview.NewDir(preview.DirConfig{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := preview.NewServer(preview.ServerConfig{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return previewtest.Instance{Target: target, Get: func(ctx context.Context, site preview.Site, latest bool, path string) (int, string, error) {
		return get(ctx, ts, site, latest, path)
	}}
}

// get fetches path with the Host header that names the preview.
func get(ctx context.Context, ts *httptest.Server, site preview.Site, latest bool, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = "edit." + site.Project + ".localhost"
	if !latest {
		req.Host = site.Thread + "." + req.Host
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
