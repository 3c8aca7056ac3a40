package preview_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/mem"
	"github.com/webordinary/webordinary/internal/preview"
)

// TestEngineServerCacheIsBounded: the blobs a serve reads from the engine fill its cache
// directory up to CacheMax and no further; the least recently served go first (a page served
// again stays), a page whose blob went is fetched again and served whole, and a serve started
// on a directory over a lower bound trims it.
func TestEngineServerCacheIsBounded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b, site, bodies := deployPages(t)
	dir := filepath.Join(t.TempDir(), "cache")
	const max = 4 * page
	ts := serveFrom(t, b, dir, max)
	fetch := func(i int) {
		t.Helper()
		code, body, err := get(ctx, ts, site, false, fmt.Sprintf("/p%d.html", i))
		if err != nil || code != 200 || body != bodies[i] {
			t.Fatalf("p%d.html: %d, %d bytes, %v; want 200 and its %d bytes", i, code, len(body), err, len(bodies[i]))
		}
		if n := dirSize(t, dir); n > max {
			t.Fatalf("after p%d.html the cache holds %d bytes; want at most %d", i, n, max)
		}
	}
	cached := func(i int) bool {
		sum := sha256.Sum256([]byte(bodies[i]))
		_, err := os.Stat(filepath.Join(dir, hex.EncodeToString(sum[:])))
		return err == nil
	}
	for i := range 4 {
		fetch(i) // exactly the bound: nothing goes
	}
	fetch(0) // served again: now the most recent of the four
	fetch(4) // over the bound: down to three quarters, least recent first
	if !cached(0) || !cached(3) || !cached(4) || cached(1) || cached(2) {
		t.Errorf("cached after p0-p3, p0 again, p4: %v %v %v %v %v; want p0, p3 and p4 only", cached(0), cached(1), cached(2), cached(3), cached(4))
	}
	for i := range bodies {
		fetch(i) // evicted ones come back from the engine, whole
	}
	fetch(1)
	ts = serveFrom(t, b, dir, 2*page) // a lower bound: the directory is trimmed at start
	if n := dirSize(t, dir); n > 2*page {
		t.Errorf("a serve started with a 2-page bound left %d bytes in its cache", n)
	}
	fetch(1)
}

// TestCachesOnOneDirectoryShareTheBound: two preview servers of one process on one cache
// directory (serve's, and its workers' reading versions back) keep it within the bound
// together, and pages fetched at once by many requests while blobs are evicted are served
// whole, none failing.
func TestCachesOnOneDirectoryShareTheBound(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b, site, bodies := deployPages(t)
	dir := filepath.Join(t.TempDir(), "cache")
	const max = 2 * page
	servers := []*httptest.Server{serveFrom(t, b, dir, max), serveFrom(t, b, dir, max)}
	for round := range 3 {
		for i := range bodies {
			if code, body, err := get(ctx, servers[(i+round)%2], site, false, fmt.Sprintf("/p%d.html", i)); err != nil || code != 200 || body != bodies[i] {
				t.Fatalf("p%d.html: %d, %d bytes, %v", i, code, len(body), err)
			}
			if n := dirSize(t, dir); n > max {
				t.Fatalf("two caches on one directory hold %d bytes; want at most %d", n, max)
			}
		}
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 3 * len(bodies) {
				k := (g + i) % len(bodies)
				if code, body, err := get(ctx, servers[g%2], site, false, fmt.Sprintf("/p%d.html", k)); err != nil || code != 200 || body != bodies[k] {
					t.Errorf("p%d.html among 16 at once: %d, %d bytes, %v", k, code, len(body), err)
					return
				}
			}
		})
	}
	wg.Wait()
}

const page = 10 << 10

// deployPages deploys eight distinct pages of page bytes each through an engine target.
func deployPages(t *testing.T) (*broker.Backend, preview.Site, []string) {
	t.Helper()
	b := mem.New(mem.Config{})
	t.Cleanup(func() { _ = b.Close() })
	e, err := preview.NewEngine(t.Context(), preview.EngineConfig{Backend: b, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	bodies := make([]string, 8)
	for i := range bodies {
		bodies[i] = rand.Text() + string(make([]byte, page-26)) // distinct, page bytes
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("p%d.html", i)), []byte(bodies[i]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	site := preview.Site{Project: "acme", Thread: "t1"}
	if _, err := e.Deploy(t.Context(), site, src); err != nil {
		t.Fatal(err)
	}
	return b, site, bodies
}

// serveFrom serves b's previews with a cache in dir bounded by max.
func serveFrom(t *testing.T, b *broker.Backend, dir string, max int64) *httptest.Server {
	t.Helper()
	srv, err := preview.NewEngineServer(t.Context(), preview.EngineServerConfig{Backend: b, CacheDir: dir, CacheMax: max})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts
}

func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		n += info.Size()
	}
	return n
}
