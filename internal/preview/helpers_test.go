package preview

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// env is one test's preview root with a Dir deploying into it and a Server serving it.
type env struct {
	t    *testing.T
	root string
	dir  *Dir
	srv  *Server
	ts   *httptest.Server
	c    *http.Client // does not follow redirects
}

// setup starts a Dir and an httptest Server on a fresh root; cfg.Root is filled in.
func setup(t *testing.T, cfg DirConfig) *env {
	t.Helper()
	cfg.Root = filepath.Join(t.TempDir(), "previews")
	cfg.Logger = testLogger(t)
	d, err := NewDir(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(ServerConfig{Root: cfg.Root, Domain: cfg.Domain, Logger: cfg.Logger})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	c := &http.Client{
		Transport:     ts.Client().Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &env{t: t, root: cfg.Root, dir: d, srv: srv, ts: ts, c: c}
}

// deploy deploys src as site and fails the test on error.
func (e *env) deploy(site Site, src string) Deployment {
	e.t.Helper()
	dep, err := e.dir.Deploy(context.Background(), site, src)
	if err != nil {
		e.t.Fatalf("deploy %s: %v", site, err)
	}
	return dep
}

// response is what a GET returned.
type response struct {
	status int
	body   string
	header http.Header
}

// get requests path from the test server with the given Host header.
func (e *env) get(host, path string) response {
	e.t.Helper()
	return e.do(http.MethodGet, host, path, nil)
}

func (e *env) do(method, host, path string, header http.Header) response {
	e.t.Helper()
	r, err := e.fetch(method, host, path, header)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// fetch is do for any goroutine: it returns errors instead of failing the test.
func (e *env) fetch(method, host, path string, header http.Header) (response, error) {
	req, err := http.NewRequest(method, e.ts.URL+path, nil)
	if err != nil {
		return response{}, err
	}
	req.Host = host
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := e.c.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: string(b), header: resp.Header}, err
}

// raw sends requestURI byte for byte (no client-side cleaning or escaping).
func (e *env) raw(host, requestURI string) response {
	e.t.Helper()
	conn, err := net.Dial("tcp", e.ts.Listener.Addr().String())
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "GET "+requestURI+" HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n"); err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: string(b), header: resp.Header}
}

// writeTree writes files (slash paths to contents) under dir, creating directories.
func writeTree(t testing.TB, dir string, files map[string]string) {
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

// testLogger routes logs to t.Log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// waitUntil polls cond until it holds, failing the test after 20 seconds.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
