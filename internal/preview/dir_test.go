package preview

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/webordinary/webordinary/internal/broker"
)

// somePages returns n pages in nested directories, each mentioning its version.
func somePages(n int, version string) map[string]string {
	files := make(map[string]string, n)
	for i := range n {
		name := fmt.Sprintf("blog/%02d/post-%03d/index.html", i/100, i)
		files[name] = fmt.Sprintf("<h1>post %d</h1><p>%s</p>", i, version)
	}
	return files
}

// The target-neutral behaviour (counts, serving, threads, names) is in previewtest; these
// tests check how Dir stores it.

func TestDeployStoresOnlyNewContent(t *testing.T) {
	t.Parallel()
	e := setup(t, DirConfig{Port: 4321})
	site := Site{"acme", "t1"}
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.html": "a", "b.html": "b", "c.html": "c", "copy-of-a.html": "a"})
	if dep := e.deploy(site, src); dep.Written+dep.Unchanged != 4 {
		t.Fatalf("first deploy = %+v, want 4 files", dep)
	}
	assertBlobs(t, e, site, 3) // identical files share a blob
	writeTree(t, src, map[string]string{"a.html": "a", "b.html": "b2", "c.html": "c", "copy-of-a.html": "a"})
	dep := e.deploy(site, src)
	if dep.Written != 1 || dep.Unchanged != 3 || dep.Version != "2" {
		t.Fatalf("second deploy = %+v, want 1 written, 3 unchanged", dep)
	}
	assertBlobs(t, e, site, 4) // b's old content stays while version 1 is kept
	if err := os.Remove(filepath.Join(src, "c.html")); err != nil {
		t.Fatal(err)
	}
	if dep := e.deploy(site, src); dep.Deleted != 1 || dep.Written != 0 {
		t.Fatalf("third deploy = %+v, want 1 deleted", dep)
	}
	if r := e.get("t1.edit.acme.localhost:4321", "/b"); r.body != "b2" {
		t.Errorf("/b = %d %q, want b2", r.status, r.body)
	}
}

// assertBlobs checks how many blobs site's store holds.
func assertBlobs(t *testing.T, e *env, site Site, want int) {
	t.Helper()
	if got := blobNames(t, e, site); len(got) != want {
		t.Errorf("blob store of %s holds %d blobs, want %d", site, len(got), want)
	}
}

func blobNames(t *testing.T, e *env, site Site) []string {
	t.Helper()
	return dirNames(t, layout{e.root}.blobs(site))
}

// dirNames lists a directory's entries by name.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, en := range entries {
		names = append(names, en.Name())
	}
	return names
}

// hashOf returns the hex sha256 of s.
func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestNewThreadLinksLatestBlobs(t *testing.T) {
	t.Parallel()
	e := setup(t, DirConfig{})
	src := t.TempDir()
	writeTree(t, src, somePages(100, "v1"))
	e.deploy(Site{"acme", "main"}, src)
	dep := e.deploy(Site{"acme", "t2"}, src)
	if dep.Written != 0 || dep.Unchanged != 100 {
		t.Fatalf("first deploy of a second thread = %+v, want everything linked from the first", dep)
	}
	l := layout{e.root}
	name := hashOf("<h1>post 5</h1><p>v1</p>")
	a, errA := os.Stat(filepath.Join(l.blobs(Site{"acme", "main"}), name))
	b, errB := os.Stat(filepath.Join(l.blobs(Site{"acme", "t2"}), name))
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		t.Errorf("blob not hard-linked across threads (%v, %v)", errA, errB)
	}
}

func TestDeployMovedFileIsLinked(t *testing.T) {
	t.Parallel()
	e := setup(t, DirConfig{})
	site := Site{"acme", "t1"}
	src := t.TempDir()
	writeTree(t, src, map[string]string{"a.html": "same bytes", "b.html": "b"})
	e.deploy(site, src)
	if err := os.Rename(filepath.Join(src, "a.html"), filepath.Join(src, "moved.html")); err != nil {
		t.Fatal(err)
	}
	dep := e.deploy(site, src)
	if dep.Written != 0 || dep.Unchanged != 2 || dep.Deleted != 1 {
		t.Fatalf("deploy after a move = %+v, want 0 written, 2 unchanged, 1 deleted", dep)
	}
	if r := e.get("edit.acme.localhost", "/moved"); r.body != "same bytes" {
		t.Errorf("/moved = %d %q", r.status, r.body)
	}
}

func TestDeployRewritesDamagedFile(t *testing.T) {
	t.Parallel()
	e := setup(t, DirConfig{})
	site := Site{"acme", "t1"}
	src := t.TempDir()
	writeTree(t, src, map[string]string{"index.html": "hello"})
	e.deploy(site, src)
	// Truncate the live copy behind the manifest's back (as a crash could).
	if err := os.Truncate(filepath.Join(layout{e.root}.blobs(site), hashOf("hello")), 0); err != nil {
		t.Fatal(err)
	}
	if dep := e.deploy(site, src); dep.Written != 1 {
		t.Fatalf("deploy over a damaged file = %+v, want it rewritten", dep)
	}
	if r := e.get("edit.acme.localhost", "/"); r.body != "hello" {
		t.Errorf("/ = %q, want hello", r.body)
	}
}

func TestPruneKeepsNewest(t *testing.T) {
	t.Parallel()
	e := setup(t, DirConfig{Keep: 2})
	site := Site{"acme", "t1"}
	src := t.TempDir()
	for i := range 5 {
		writeTree(t, src, map[string]string{"index.html": strconv.Itoa(i)})
		e.deploy(site, src)
	}
	if got, want := dirNames(t, layout{e.root}.versions(site)), []string{"4.json", "5.json"}; !slices.Equal(got, want) {
		t.Errorf("versions/ = %q, want %q", got, want)
	}
	want := []string{hashOf("3"), hashOf("4")}
	slices.Sort(want)
	if got := blobNames(t, e, site); !slices.Equal(got, want) {
		t.Errorf("blobs/ = %q, want the blobs of versions 4 and 5 only", got)
	}
}

func TestPruneSparesPinnedVersions(t *testing.T) {
	t.Parallel()
	e := setup(t, DirConfig{Keep: 2})
	site := Site{"acme", "t1"}
	l := layout{e.root}
	files := map[string]string{"blobs/new.x.tmp": "", "versions/6.json.x.tmp": ""}
	for n := 1; n <= 5; n++ {
		content := strconv.Itoa(n)
		files["blobs/"+hashOf(content)] = content
		files["versions/"+content+".json"] = fmt.Sprintf(`{"files":{"index.html":{"sha256":%q,"size":1}}}`, hashOf(content))
	}
	writeTree(t, l.thread(site), files)
	if err := swapLink(l.current(site), currentTarget(5)); err != nil {
		t.Fatal(err)
	}
	if err := swapLink(l.latest(site.Project), latestTarget(site, 1)); err != nil {
		t.Fatal(err)
	}
	e.dir.prune(context.Background(), site)
	if got, want := dirNames(t, l.versions(site)), []string{"1.json", "4.json", "5.json"}; !slices.Equal(got, want) {
		t.Errorf("versions/ after prune = %q, want %q (newest 2 and the one latest points at)", got, want)
	}
	want := []string{hashOf("1"), hashOf("4"), hashOf("5")}
	slices.Sort(want)
	if got := blobNames(t, e, site); !slices.Equal(got, want) {
		t.Errorf("blobs/ after prune = %q, want %q", got, want)
	}
}

func TestSourceSymlinks(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"secret.txt": "secret"})
	tests := []struct {
		name    string
		link    string // where the symlink "x" in the source points
		wantErr error
	}{
		{"to /etc", "/etc", ErrUnsafeSource},
		{"to /etc/passwd", "/etc/passwd", ErrUnsafeSource},
		{"relative out of the tree", "../" + filepath.Base(outside) + "/secret.txt", ErrUnsafeSource},
		{"absolute outside file", filepath.Join(outside, "secret.txt"), ErrUnsafeSource},
		{"to a directory inside", "sub", ErrUnsafeSource},
		{"dangling", "nowhere", ErrUnsafeSource},
		{"to a file inside", "sub/page.html", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, DirConfig{})
			src := filepath.Join(filepath.Dir(outside), "src-"+strings.ReplaceAll(tt.name, " ", "-"))
			writeTree(t, src, map[string]string{"index.html": "home", "sub/page.html": "page"})
			t.Cleanup(func() { os.RemoveAll(src) })
			if err := os.Symlink(tt.link, filepath.Join(src, "x")); err != nil {
				t.Fatal(err)
			}
			dep, err := e.dir.Deploy(context.Background(), Site{"acme", "t1"}, src)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Deploy = %+v, %v; want %v", dep, err, tt.wantErr)
			}
			if err != nil {
				if r := e.get("edit.acme.localhost", "/"); r.status != 404 {
					t.Errorf("a rejected deploy was published: %d %q", r.status, r.body)
				}
				return
			}
			if r := e.get("edit.acme.localhost", "/x"); r.body != "page" {
				t.Errorf("/x = %d %q, want the link target's content", r.status, r.body)
			}
		})
	}
}

func TestDeployRejectsSpecialFiles(t *testing.T) {
	t.Parallel()
	e := setup(t, DirConfig{})
	src := t.TempDir()
	writeTree(t, src, map[string]string{"index.html": "x"})
	if err := mkfifo(filepath.Join(src, "pipe")); err != nil {
		t.Skip("no fifo support:", err)
	}
	_, err := e.dir.Deploy(context.Background(), Site{"acme", "t1"}, src)
	if !errors.Is(err, ErrUnsafeSource) || !strings.Contains(err.Error(), "pipe") {
		t.Errorf("Deploy with a fifo = %v, want ErrUnsafeSource naming it", err)
	}
}

func TestDeployErrors(t *testing.T) {
	t.Parallel()
	e := setup(t, DirConfig{})
	site := Site{"acme", "t1"}
	src := t.TempDir()
	writeTree(t, src, map[string]string{"index.html": "x"})
	if _, err := e.dir.Deploy(context.Background(), site, filepath.Join(src, "missing")); err == nil {
		t.Error("Deploy of a missing directory succeeded")
	}
	if _, err := e.dir.Deploy(context.Background(), site, filepath.Join(src, "index.html")); err == nil {
		t.Error("Deploy of a file succeeded")
	}
	if r := e.get("t1.edit.acme.localhost", "/"); r.status != 404 || !strings.Contains(r.body, `no preview for thread "t1" of project "acme" yet`) {
		t.Errorf("failed deploys left a preview: %d %q", r.status, r.body)
	}
}

func TestConcurrentDeploysOfOneSite(t *testing.T) {
	t.Parallel()
	e := setup(t, DirConfig{Keep: 100})
	site := Site{"acme", "t1"}
	const n = 8
	var wg sync.WaitGroup
	versions := make([]string, n)
	var unchanged atomic.Int64
	for i := range n {
		src := t.TempDir()
		writeTree(t, src, map[string]string{"index.html": strconv.Itoa(i), "same.html": "same"})
		wg.Go(func() {
			dep, err := e.dir.Deploy(context.Background(), site, src)
			if err != nil {
				t.Error(err)
			}
			versions[i] = dep.Version
			unchanged.Add(int64(dep.Unchanged))
		})
	}
	wg.Wait()
	slices.SortFunc(versions, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
	for i, v := range versions {
		if v != strconv.Itoa(i+1) {
			t.Fatalf("versions = %q, want 1..%d once each", versions, n)
		}
	}
	// Serialized deploys each see the previous one's blobs: same.html is written once.
	if got := unchanged.Load(); got != n-1 {
		t.Errorf("same.html kept %d times, want %d", got, n-1)
	}
}

// TestFencesHoldAcrossDirsOnOneRoot: two Dirs on one root (two processes) share the fences:
// they live on disk beside the pointers, checked under the project's flock. Owners with
// tokens 1..n of one tenant deploy at once through either Dir, each Dir its own thread (a
// Dir numbers a thread's versions for its process only); whatever the order, the newest
// token's version ends as the project's latest, every deploy either switched or was refused
// with ErrLeaseLost, and a stale deploy after all of them is refused.
func TestFencesHoldAcrossDirsOnOneRoot(t *testing.T) {
	t.Parallel()
	e := setup(t, DirConfig{})
	other, err := NewDir(DirConfig{Root: e.root})
	if err != nil {
		t.Fatal(err)
	}
	dirs := []*Dir{e.dir, other}
	sites := []Site{{"acme", "t0"}, {"acme", "t1"}}
	const n = 8
	srcs := make([]string, n+1)
	for tok := 1; tok <= n; tok++ {
		srcs[tok] = t.TempDir()
		writeTree(t, srcs[tok], map[string]string{"index.html": "token " + strconv.Itoa(tok)})
	}
	var wg sync.WaitGroup
	for tok := 1; tok <= n; tok++ {
		wg.Go(func() {
			ctx := WithFence(context.Background(), Fence{Holder: "acme/alice", Token: uint64(tok)})
			if _, err := dirs[tok%2].Deploy(ctx, sites[tok%2], srcs[tok]); err != nil && !errors.Is(err, broker.ErrLeaseLost) {
				t.Errorf("deploy under token %d: %v", tok, err)
			}
		})
	}
	wg.Wait()
	want := "token " + strconv.Itoa(n)
	if r := e.get(sites[n%2].Thread+".edit.acme.localhost", "/"); r.status != 200 || r.body != want {
		t.Errorf("thread preview after the race = %d %q, want %q", r.status, r.body, want)
	}
	if r := e.get("edit.acme.localhost", "/"); r.status != 200 || r.body != want {
		t.Errorf("latest preview after the race = %d %q, want %q", r.status, r.body, want)
	}
	stale := WithFence(context.Background(), Fence{Holder: "acme/alice", Token: 1})
	if _, err := other.Deploy(stale, sites[1], srcs[1]); !errors.Is(err, broker.ErrLeaseLost) {
		t.Errorf("a stale deploy through the other Dir: err = %v, want ErrLeaseLost", err)
	}
}
