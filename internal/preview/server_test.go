package preview

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// siteFiles is a small Astro-like build output.
var siteFiles = map[string]string{
	"index.html":            "<h1>home</h1>",
	"about.html":            "<h1>about</h1>",
	"blog/index.html":       "<h1>blog</h1>",
	"blog/first/index.html": "<h1>first</h1>",
	"docs/readme.txt":       "no index here",
	"style.css":             "body{}",
	"app.js":                "let x",
	"logo.svg":              "<svg/>",
	"font.woff2":            "wOF2",
	"data.json":             "{}",
	"404.html":              "<h1>lost</h1>",
}

// setupSite deploys siteFiles as acme/t1.
func setupSite(t *testing.T, cfg DirConfig) *env {
	t.Helper()
	e := setup(t, cfg)
	src := t.TempDir()
	writeTree(t, src, siteFiles)
	e.deploy(Site{"acme", "t1"}, src)
	return e
}

func TestServerHosts(t *testing.T) {
	t.Parallel()
	e := setupSite(t, DirConfig{})
	custom := setupSite(t, DirConfig{Domain: "example.com"})
	tests := []struct {
		e          *env
		host       string
		wantStatus int
		wantBody   string
	}{
		{e, "edit.acme.localhost", 200, "<h1>home</h1>"},
		{e, "edit.acme.localhost:8080", 200, "<h1>home</h1>"},
		{e, "t1.edit.acme.localhost:8080", 200, "<h1>home</h1>"},
		{e, "EDIT.Acme.LOCALHOST.", 200, "<h1>home</h1>"},
		{e, "edit.other.localhost", 404, `no preview for project "other" yet`},
		{e, "t2.edit.acme.localhost", 404, `no preview for thread "t2" of project "acme" yet`},
		{e, "acme.localhost", 404, `project "acme" is not live yet`},
		{e, "a.b.localhost", 404, "use edit.<project>.localhost"},
		{e, "x.y.edit.acme.localhost", 404, "no preview at host"},
		{e, "t1.view.acme.localhost", 404, "no preview at host"},
		{e, "edit.acme.example.com", 404, "no preview at host"},
		{e, "edit.a_b.localhost", 404, "must be 1-63 characters"},
		{e, "", 404, "no preview at host"},
		{custom, "edit.acme.example.com", 200, "<h1>home</h1>"},
		{custom, "t1.edit.acme.example.com:443", 200, "<h1>home</h1>"},
		{custom, "edit.acme.localhost", 404, "use edit.<project>.example.com"},
	}
	for _, tt := range tests {
		r := tt.e.get(tt.host, "/")
		if r.status != tt.wantStatus || !strings.Contains(r.body, tt.wantBody) {
			t.Errorf("Host %q: %d %q, want %d containing %q", tt.host, r.status, r.body, tt.wantStatus, tt.wantBody)
		}
		if got := r.header.Get("Cache-Control"); got != "no-cache" {
			t.Errorf("Host %q: Cache-Control %q, want no-cache", tt.host, got)
		}
	}
}

// TestProductionDeploy: a production deploy is served on <project>.<domain> and switched
// atomically like previews; it touches neither the project's latest nor a thread's preview.
func TestProductionDeploy(t *testing.T) {
	t.Parallel()
	e := setupSite(t, DirConfig{Port: 8080})
	live := t.TempDir()
	writeTree(t, live, map[string]string{"index.html": "<h1>live</h1>"})
	dep, err := e.dir.DeployProduction(context.Background(), "acme", live)
	if err != nil {
		t.Fatal(err)
	}
	if len(dep.URLs) != 1 || dep.URLs[0] != "http://acme.localhost:8080/" {
		t.Fatalf("live URLs %v", dep.URLs)
	}
	for host, want := range map[string]string{"acme.localhost": "<h1>live</h1>", "edit.acme.localhost": "<h1>home</h1>",
		"t1.edit.acme.localhost": "<h1>home</h1>"} {
		if r := e.get(host, "/"); r.status != 200 || !strings.Contains(r.body, want) {
			t.Errorf("%s: %d %q, want %q", host, r.status, r.body, want)
		}
	}
	writeTree(t, live, map[string]string{"index.html": "<h1>live 2</h1>"})
	if _, err := e.dir.DeployProduction(context.Background(), "acme", live); err != nil {
		t.Fatal(err)
	}
	if r := e.get("acme.localhost", "/"); !strings.Contains(r.body, "live 2") {
		t.Fatalf("second production deploy not live: %q", r.body)
	}
	if _, err := e.dir.DeployProduction(context.Background(), "Bad_Name", live); err == nil {
		t.Fatal("an invalid project name was deployed")
	}
}

func TestServerPaths(t *testing.T) {
	t.Parallel()
	e := setupSite(t, DirConfig{})
	tests := []struct {
		path       string
		wantStatus int
		wantBody   string
		wantType   string
	}{
		{"/", 200, "<h1>home</h1>", "text/html; charset=utf-8"},
		{"/index.html", 200, "<h1>home</h1>", "text/html; charset=utf-8"},
		{"/about", 200, "<h1>about</h1>", "text/html; charset=utf-8"},
		{"/about.html", 200, "<h1>about</h1>", "text/html; charset=utf-8"},
		{"/blog/", 200, "<h1>blog</h1>", "text/html; charset=utf-8"},
		{"/blog/first/", 200, "<h1>first</h1>", "text/html; charset=utf-8"},
		{"/blog/first/?utm=x", 200, "<h1>first</h1>", "text/html; charset=utf-8"},
		{"/style.css", 200, "body{}", "text/css; charset=utf-8"},
		{"/app.js", 200, "let x", "text/javascript; charset=utf-8"},
		{"/logo.svg", 200, "<svg/>", "image/svg+xml"},
		{"/font.woff2", 200, "wOF2", "font/woff2"},
		{"/data.json", 200, "{}", "application/json"},
		{"/docs/readme.txt", 200, "no index here", "text/plain; charset=utf-8"},
		{"/docs/", 404, "<h1>lost</h1>", "text/html; charset=utf-8"}, // no listing
		{"/nope", 404, "<h1>lost</h1>", "text/html; charset=utf-8"},
		{"/about/", 404, "<h1>lost</h1>", "text/html; charset=utf-8"},
	}
	for _, tt := range tests {
		r := e.get("edit.acme.localhost", tt.path)
		if r.status != tt.wantStatus || r.body != tt.wantBody || r.header.Get("Content-Type") != tt.wantType {
			t.Errorf("GET %s = %d %q %q, want %d %q %q", tt.path, r.status, r.body, r.header.Get("Content-Type"), tt.wantStatus, tt.wantBody, tt.wantType)
		}
		if r.header.Get("Cache-Control") != "no-cache" {
			t.Errorf("GET %s: no Cache-Control: no-cache", tt.path)
		}
	}
}

func TestServerRedirectsDirectories(t *testing.T) {
	t.Parallel()
	e := setupSite(t, DirConfig{})
	for path, want := range map[string]string{"/blog": "/blog/", "/blog/first?a=1": "/blog/first/?a=1"} {
		r := e.get("edit.acme.localhost", path)
		if r.status != http.StatusFound || r.header.Get("Location") != want {
			t.Errorf("GET %s = %d Location %q, want 302 to %q", path, r.status, r.header.Get("Location"), want)
		}
	}
}

func TestServerNotFoundWithout404Page(t *testing.T) {
	t.Parallel()
	e := setup(t, DirConfig{})
	src := t.TempDir()
	writeTree(t, src, map[string]string{"index.html": "home", "docs/a.txt": "a"})
	e.deploy(Site{"acme", "t1"}, src)
	for _, path := range []string{"/missing", "/docs/", "/docs"} {
		r := e.get("edit.acme.localhost", path)
		if r.status != 404 || !strings.Contains(r.body, "no page "+path+" in this preview") {
			t.Errorf("GET %s = %d %q, want a 404 naming the page", path, r.status, r.body)
		}
	}
}

func TestServerMethodsAndValidators(t *testing.T) {
	t.Parallel()
	e := setupSite(t, DirConfig{})
	host := "edit.acme.localhost"
	if r := e.do(http.MethodPost, host, "/", nil); r.status != http.StatusMethodNotAllowed || r.header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST = %d Allow %q, want 405 GET, HEAD", r.status, r.header.Get("Allow"))
	}
	if r := e.do(http.MethodHead, host, "/about", nil); r.status != 200 || r.body != "" || r.header.Get("Content-Length") != "14" {
		t.Errorf("HEAD = %d %q length %q", r.status, r.body, r.header.Get("Content-Length"))
	}
	first := e.get(host, "/style.css")
	etag := first.header.Get("ETag")
	if etag == "" || first.header.Get("X-Preview-Version") != "1" || first.header.Get("X-Preview-Thread") != "t1" {
		t.Fatalf("headers = %v, want an ETag and version 1 of t1", first.header)
	}
	if r := e.do(http.MethodGet, host, "/style.css", http.Header{"If-None-Match": {etag}}); r.status != http.StatusNotModified {
		t.Errorf("conditional GET = %d, want 304", r.status)
	}
	if r := e.do(http.MethodGet, host, "/style.css", http.Header{"Range": {"bytes=0-3"}}); r.status != http.StatusPartialContent || r.body != "body" {
		t.Errorf("range GET = %d %q, want 206 body", r.status, r.body)
	}
}

func TestServerTraversal(t *testing.T) {
	t.Parallel()
	e := setupSite(t, DirConfig{})
	// Swap a stored blob for an escaping symlink, as tampering could (Deploy never does).
	blob := filepath.Join(layout{e.root}.blobs(Site{"acme", "t1"}), hashOf(siteFiles["about.html"]))
	if err := os.Remove(blob); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", blob); err != nil {
		t.Fatal(err)
	}
	uris := []string{
		"/../../etc/passwd", "/../../../../../../../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd",
		"/..%2f..%2f..%2fetc%2fpasswd", "/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd", "/blog/../../../etc/passwd",
		"/..%5c..%5cetc%5cpasswd", "/etc/passwd", "/about", "/about.html", "/blog/../about",
		"/../blobs/" + hashOf(siteFiles["index.html"]), "/%00", "/index.html%00.css",
	}
	for _, uri := range uris {
		r := e.raw("edit.acme.localhost", uri)
		if r.status == 200 || strings.Contains(r.body, "root:") {
			t.Errorf("GET %s = %d %q: served something outside the version", uri, r.status, r.body)
		}
	}
	if r := e.raw("edit.acme.localhost", "/blog/../style.css"); r.status != 200 || r.body != "body{}" {
		t.Errorf(`"/blog/../style.css" = %d %q, want the stylesheet (".." stays inside)`, r.status, r.body)
	}
}
