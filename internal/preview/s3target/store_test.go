package s3target_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"

	"github.com/webordinary/webordinary/internal/preview"
	"github.com/webordinary/webordinary/internal/preview/s3target"
)

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

// TestPublishServesByHost: production sites live beside previews, keyed by host; a preview
// host never reaches them and an unknown host is 404.
func TestPublishServesByHost(t *testing.T) {
	t.Parallel()
	store, ts := setup(t, nil)
	ctx := context.Background()
	src := t.TempDir()
	writeTree(t, src, map[string]string{"index.html": "live site", "about.html": "about us", "404.html": "gone"})
	dep, err := store.Publish(ctx, "www.example.com", src)
	if err != nil {
		t.Fatal(err)
	}
	if dep.Written != 3 || len(dep.URLs) != 1 || dep.URLs[0] != "https://www.example.com/" {
		t.Fatalf("publish = %+v, want 3 written and https://www.example.com/", dep)
	}
	for _, c := range []struct {
		host, path string
		status     int
		body       string
	}{
		{"www.example.com", "/", 200, "live site"},
		{"www.example.com:8080", "/about", 200, "about us"},
		{"www.example.com", "/nope", 404, "gone"},
		{"other.example.com", "/", 404, ""},
		{"edit.acme.localhost", "/", 404, ""},
	} {
		status, body, err := get(ctx, ts, c.host, c.path)
		if err != nil || status != c.status || (c.body != "" && body != c.body) {
			t.Errorf("GET %s%s = %d %q %v, want %d %q", c.host, c.path, status, body, err, c.status, c.body)
		}
	}
	if _, err := store.Publish(ctx, "Bad_Host", src); !errors.Is(err, s3target.ErrInvalidHost) {
		t.Errorf("Publish(Bad_Host) = %v, want ErrInvalidHost", err)
	}
}

// TestDeployProductionServesLiveHost: a project's live site is served at <project>.<domain>
// from its own pointer; previews and the project's latest never move it, nor it them.
func TestDeployProductionServesLiveHost(t *testing.T) {
	t.Parallel()
	store, ts := setup(t, nil)
	ctx := context.Background()
	expect := func(host, want string, status int) {
		t.Helper()
		got, body, err := get(ctx, ts, host, "/")
		if err != nil || got != status || (want != "" && body != want) {
			t.Errorf("GET %s/ = %d %q %v, want %d %q", host, got, body, err, status, want)
		}
	}
	site := preview.Site{Project: "acme", Thread: "t1"}
	deployTree(t, store, site, map[string]string{"index.html": "draft 1"})
	expect("acme.localhost", "", http.StatusNotFound) // not live before its first publish
	live := t.TempDir()
	writeTree(t, live, map[string]string{"index.html": "draft 1"})
	dep, err := store.DeployProduction(ctx, "acme", live)
	if err != nil {
		t.Fatal(err)
	}
	if len(dep.URLs) != 1 || dep.URLs[0] != "http://acme.localhost/" || dep.Written != 0 || dep.Unchanged != 1 {
		t.Fatalf("DeployProduction = %+v, want only http://acme.localhost/ and the blob reused from the preview", dep)
	}
	deployTree(t, store, site, map[string]string{"index.html": "draft 2"})
	expect("acme.localhost:8080", "draft 1", http.StatusOK)
	expect("edit.acme.localhost", "draft 2", http.StatusOK)
	expect("t1.edit.acme.localhost", "draft 2", http.StatusOK)
	if _, err := store.DeployProduction(ctx, "Bad_Project", live); err == nil {
		t.Error("DeployProduction(Bad_Project): expected an error")
	}
}

// TestDeployReportsPrevious: a deploy names what the owner saw before: the thread's last
// version, or for a thread's first deploy the project's latest.
func TestDeployReportsPrevious(t *testing.T) {
	t.Parallel()
	store, _ := setup(t, nil)
	first := deployTree(t, store, preview.Site{Project: "acme", Thread: "t1"}, map[string]string{"index.html": "a"})
	if !first.Previous.IsZero() {
		t.Errorf("first deploy of the project: Previous = %+v, want zero", first.Previous)
	}
	again := deployTree(t, store, preview.Site{Project: "acme", Thread: "t1"}, map[string]string{"index.html": "b"})
	if want := (preview.Ref{Thread: "t1", Version: first.Version}); again.Previous != want {
		t.Errorf("second deploy of t1: Previous = %+v, want %+v", again.Previous, want)
	}
	other := deployTree(t, store, preview.Site{Project: "acme", Thread: "t2"}, map[string]string{"index.html": "c"})
	if want := (preview.Ref{Thread: "t1", Version: again.Version}); other.Previous != want {
		t.Errorf("first deploy of t2: Previous = %+v, want the latest %+v", other.Previous, want)
	}
}

// TestVersionReadsBack: a deployed version reads back (files, content) while its thread keeps
// it; another id is ErrNoVersion.
func TestVersionReadsBack(t *testing.T) {
	t.Parallel()
	store, _ := setup(t, nil)
	site := preview.Site{Project: "acme", Thread: "t1"}
	dep := deployTree(t, store, site, map[string]string{"index.html": "hello", "a/b.css": "b{}"})
	deployTree(t, store, site, map[string]string{"index.html": "later"})
	v, err := store.Version(context.Background(), site, dep.Version)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if files := v.Files(); len(files) != 2 || v.ID() != dep.Version {
		t.Fatalf("version %s: files %v, id %s", dep.Version, files, v.ID())
	}
	rec := httptest.NewRecorder()
	v.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "hello" {
		t.Errorf("GET / of version %s = %d %q, want 200 hello", dep.Version, rec.Code, rec.Body.String())
	}
	for _, id := range []string{"9", "x", "0"} {
		if _, err := store.Version(context.Background(), site, id); !errors.Is(err, preview.ErrNoVersion) {
			t.Errorf("Version(%q) = %v, want ErrNoVersion", id, err)
		}
	}
}

func deployTree(t *testing.T, store *s3target.Store, site preview.Site, files map[string]string) preview.Deployment {
	t.Helper()
	src := t.TempDir()
	writeTree(t, src, files)
	dep, err := store.Deploy(context.Background(), site, src)
	if err != nil {
		t.Fatal(err)
	}
	return dep
}

// TestRangeRequest: a ranged GET is served from the blob by a ranged S3 read.
func TestRangeRequest(t *testing.T) {
	t.Parallel()
	store, ts := setup(t, nil)
	src := t.TempDir()
	writeTree(t, src, map[string]string{"big.txt": strings.Repeat("0123456789", 1000)})
	if _, err := store.Deploy(context.Background(), preview.Site{Project: "acme", Thread: "t1"}, src); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/big.txt", nil)
	req.Host = "t1.edit.acme.localhost"
	req.Header.Set("Range", "bytes=5005-5009")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 16)
	n, _ := resp.Body.Read(buf)
	if resp.StatusCode != http.StatusPartialContent || string(buf[:n]) != "56789" {
		t.Fatalf("range = %d %q, want 206 \"56789\"", resp.StatusCode, buf[:n])
	}
}

// TestKeepPrunesManifests: only the newest Keep manifests of a thread stay.
func TestKeepPrunesManifests(t *testing.T) {
	t.Parallel()
	store, ts, client, bucket := setupRaw(t, nil)
	site := preview.Site{Project: "acme", Thread: "t1"}
	src := t.TempDir()
	for i := range 5 {
		writeTree(t, src, map[string]string{"index.html": fmt.Sprint("v", i)})
		if _, err := store.Deploy(context.Background(), site, src); err != nil {
			t.Fatal(err)
		}
	}
	if status, body, _ := get(context.Background(), ts, "t1.edit.acme.localhost", "/"); status != 200 || body != "v4" {
		t.Fatalf("after 5 deploys / = %d %q, want v4", status, body)
	}
	out, err := client.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String("site/previews/acme/threads/t1/versions/")})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, path.Base(*o.Key))
	}
	if slices.Sort(keys); !slices.Equal(keys, []string{"3.json", "4.json", "5.json"}) {
		t.Errorf("manifests after 5 deploys = %q, want the newest 3", keys)
	}
}

// calls counts S3 API calls by operation.
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *calls) middleware(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("wo-count",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			c.mu.Lock()
			c.n[awsmiddleware.GetOperationName(ctx)]++
			c.mu.Unlock()
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
}

func (c *calls) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

func format(n map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, n[k]))
	}
	return strings.Join(parts, ", ")
}

// TestCallsPerDeploy counts the S3 calls of a typical edit: a 50-file site where one page
// changes (the cost table in ARCHITECTURE quotes this test's log).
func TestCallsPerDeploy(t *testing.T) {
	t.Parallel()
	c := &calls{n: map[string]int{}}
	store, ts := setup(t, []func(*middleware.Stack) error{c.middleware})
	site := preview.Site{Project: "acme", Thread: "t1"}
	src := t.TempDir()
	files := map[string]string{}
	for i := range 50 {
		files[fmt.Sprintf("p%02d/index.html", i)] = fmt.Sprint("page ", i)
	}
	writeTree(t, src, files)
	ctx := context.Background()
	if _, err := store.Deploy(ctx, site, src); err != nil {
		t.Fatal(err)
	}
	t.Logf("first deploy of 50 files: %s", format(c.take()))
	writeTree(t, src, map[string]string{"p07/index.html": "changed"})
	if _, err := store.Deploy(ctx, site, src); err != nil {
		t.Fatal(err)
	}
	edit := c.take()
	t.Logf("deploy changing one page: %s", format(edit))
	if edit["PutObject"] != 4 { // one blob, the manifest, two pointers
		t.Errorf("deploy changing one page made %d PutObject calls, want 4", edit["PutObject"])
	}
	if _, _, err := get(ctx, ts, "t1.edit.acme.localhost", "/p07/"); err != nil {
		t.Fatal(err)
	}
	t.Logf("one page view: %s", format(c.take()))
}
