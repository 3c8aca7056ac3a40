package previewtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/webordinary/webordinary/internal/preview"
)

// Harness describes a target under test.
type Harness struct {
	// New returns a fresh target with no previews, for one test; it registers its own cleanup
	// with t.Cleanup.
	New func(t *testing.T) Instance
}

// Instance is one target under test and a way to read what it published.
type Instance struct {
	Target preview.Target
	// Get fetches path (such as "/" or "/blog/post/") from site's thread preview, or from the
	// project's latest preview when latest is true, and returns the HTTP status and body.
	Get func(ctx context.Context, site preview.Site, latest bool, path string) (status int, body string, err error)
}

// contract is one subtest: a promise of the Target doc comment and the test that checks it.
type contract struct {
	name string
	test func(t *testing.T, in Instance)
}

// Run runs every contract test against h as parallel subtests.
func Run(t *testing.T, h Harness) {
	t.Helper()
	for _, c := range contracts {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.test(t, h.New(t))
		})
	}
}

// deploy deploys src as site and fails the test on error.
func deploy(t *testing.T, in Instance, site preview.Site, src string) preview.Deployment {
	t.Helper()
	dep, err := in.Target.Deploy(context.Background(), site, src)
	if err != nil {
		t.Fatalf("deploy %+v: %v", site, err)
	}
	return dep
}

// expect fetches path from site's preview and checks status and body.
func expect(t *testing.T, in Instance, site preview.Site, latest bool, path string, status int, body string) {
	t.Helper()
	got, gotBody, err := in.Get(context.Background(), site, latest, path)
	if err != nil {
		t.Fatalf("get %s (latest %v): %v", path, latest, err)
	}
	if got != status || (status == 200 && gotBody != body) {
		t.Errorf("get %s of %+v (latest %v) = %d %q, want %d %q", path, site, latest, got, gotBody, status, body)
	}
}

// writeTree writes files (slash paths to contents) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// pages returns n pages in Astro's directory format, each mentioning marker.
func pages(n int, marker string) map[string]string {
	files := make(map[string]string, n)
	for i := range n {
		files[fmt.Sprintf("blog/%02d/post-%03d/index.html", i/100, i)] = fmt.Sprintf("<h1>post %d</h1><p>%s</p>", i, marker)
	}
	return files
}
