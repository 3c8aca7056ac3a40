package previewtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/preview"
	"github.com/webordinary/webordinary/internal/tenant"
)

var contracts = []contract{
	{"DeployServesThreadAndLatest", testDeployServes},
	{"DeployCountsByContent", testDeployCounts},
	{"ThreadsAreSeparateLatestFollows", testThreads},
	{"InvalidSiteNames", testInvalidSite},
	{"SymlinkOutOfSourceRejected", testUnsafeSource},
	{"LinksOutRevealNothing", testLinksOutRevealNothing},
	{"HugeSparseFileEndsWithContext", testHugeSparseFile},
	{"CancelledContext", testCancelled},
	{"ConcurrentDeploysOfOneSite", testConcurrent},
	{"LiveVersionIsThePublishedSite", testLiveVersion},
	{"BaselineLeavesTheLatestAlone", testBaseline},
	{"StaleOwnersSwitchIsRefused", testStaleOwnersSwitch},
}

// testStaleOwnersSwitch: a lease holder's deploys carry its fence (preview.WithFence). After
// a newer owner of the tenant (token 2) switched, a stale owner's (token 1) deploy is refused
// with broker.ErrLeaseLost and switches nothing, on its thread, on another thread of the
// tenant (the project's latest carries the newer token) and on the live site; the newer
// versions stay live. Another tenant's tokens are not compared with the first's, and a
// switch of theirs does not make the stale owner's pass.
func testStaleOwnersSwitch(t *testing.T, in Instance) {
	ctx := context.Background()
	older := preview.WithFence(ctx, preview.Fence{Holder: "acme/alice", Token: 1})
	newer := preview.WithFence(ctx, preview.Fence{Holder: "acme/alice", Token: 2})
	bob := preview.WithFence(ctx, preview.Fence{Holder: "acme/bob", Token: 1})
	t1, t2, t3 := preview.Site{Project: "acme", Thread: "t1"}, preview.Site{Project: "acme", Thread: "t2"}, preview.Site{Project: "acme", Thread: "t3"}
	fresh, stale, other := t.TempDir(), t.TempDir(), t.TempDir()
	writeTree(t, fresh, map[string]string{"index.html": "newer owner"})
	writeTree(t, stale, map[string]string{"index.html": "stale owner"})
	writeTree(t, other, map[string]string{"index.html": "another tenant"})
	deployUnder(t, newer, in, t1, fresh, nil)
	deployUnder(t, older, in, t1, stale, broker.ErrLeaseLost)
	expect(t, in, t1, false, "/", 200, "newer owner")
	expect(t, in, t1, true, "/", 200, "newer owner")
	deployUnder(t, older, in, t2, stale, broker.ErrLeaseLost)
	expect(t, in, t2, false, "/", 404, "")
	expect(t, in, t1, true, "/", 200, "newer owner")
	deployUnder(t, bob, in, t3, other, nil)
	deployUnder(t, older, in, t1, stale, broker.ErrLeaseLost)
	expect(t, in, t1, false, "/", 200, "newer owner")
	expect(t, in, t3, true, "/", 200, "another tenant")
	deployUnder(t, newer, in, t1, fresh, nil)
	expect(t, in, t1, true, "/", 200, "newer owner")
	prod, ok := in.Target.(preview.Production)
	if !ok {
		return
	}
	live, err := prod.DeployProduction(newer, "acme", fresh)
	if err != nil {
		t.Fatalf("the newer owner's DeployProduction: %v", err)
	}
	if _, err := prod.DeployProduction(older, "acme", stale); !errors.Is(err, broker.ErrLeaseLost) {
		t.Errorf("the stale owner's DeployProduction: err = %v, want broker.ErrLeaseLost", err)
	}
	if lv, ok := in.Target.(preview.LiveVersions); ok {
		v, err := lv.LiveVersion(ctx, "acme")
		if err != nil {
			t.Fatalf("LiveVersion: %v", err)
		}
		defer v.Close()
		if v.ID() != live.Version {
			t.Errorf("the live site after a stale owner's publish is version %s, want the newer owner's %s", v.ID(), live.Version)
		}
	}
}

// deployUnder deploys src as site under ctx's fence and checks the error is want (nil: none).
func deployUnder(t *testing.T, ctx context.Context, in Instance, site preview.Site, src string, want error) {
	t.Helper()
	_, err := in.Target.Deploy(ctx, site, src)
	switch {
	case want == nil && err != nil:
		t.Fatalf("deploy %+v: %v", site, err)
	case want != nil && !errors.Is(err, want):
		t.Errorf("deploy %+v: err = %v, want %v", site, err, want)
	}
}

// testBaseline: a thread's baseline (what its owner had when it started) is served at the
// thread's URL without switching the project's latest, and the thread's next deploy reports it
// as its Previous.
func testBaseline(t *testing.T, in Instance) {
	bl, ok := in.Target.(preview.Baselines)
	if !ok {
		t.Skip("the target keeps no baselines")
	}
	ctx := context.Background()
	other, site := preview.Site{Project: "acme", Thread: "t1"}, preview.Site{Project: "acme", Thread: "t2"}
	src, base, change := t.TempDir(), t.TempDir(), t.TempDir()
	writeTree(t, src, map[string]string{"index.html": "other thread"})
	deploy(t, in, other, src)
	writeTree(t, base, map[string]string{"index.html": "as it was"})
	dep, err := bl.DeployBaseline(ctx, site, base)
	if err != nil {
		t.Fatalf("DeployBaseline: %v", err)
	}
	if len(dep.URLs) != 1 || dep.Version == "" {
		t.Errorf("DeployBaseline = %+v, want the thread's URL only and a version", dep)
	}
	expect(t, in, site, false, "/", 200, "as it was")
	expect(t, in, site, true, "/", 200, "other thread") // the latest is left alone
	writeTree(t, change, map[string]string{"index.html": "changed"})
	next := deploy(t, in, site, change)
	if want := (preview.Ref{Thread: site.Thread, Version: dep.Version}); next.Previous != want {
		t.Errorf("the deploy after the baseline has Previous %+v, want %+v", next.Previous, want)
	}
	expect(t, in, site, true, "/", 200, "changed")
}

// testLiveVersion: a target that reads its live site back returns what the last publish
// deployed, never a thread's preview, and ErrNoVersion before the first publish.
func testLiveVersion(t *testing.T, in Instance) {
	lv, ok := in.Target.(preview.LiveVersions)
	prod, ok2 := in.Target.(preview.Production)
	if !ok || !ok2 {
		t.Skip("the target does not read its live site back")
	}
	ctx := context.Background()
	site := preview.Site{Project: "acme", Thread: "t1"}
	src := t.TempDir()
	writeTree(t, src, map[string]string{"index.html": "draft"})
	deploy(t, in, site, src)
	if _, err := lv.LiveVersion(ctx, "acme"); !errors.Is(err, preview.ErrNoVersion) {
		t.Fatalf("LiveVersion before any publish: err = %v, want ErrNoVersion", err)
	}
	live := t.TempDir()
	writeTree(t, live, map[string]string{"index.html": "live home", "about/index.html": "live about"})
	dep, err := prod.DeployProduction(ctx, "acme", live)
	if err != nil {
		t.Fatalf("DeployProduction: %v", err)
	}
	deploy(t, in, site, src) // a later preview leaves the live site alone
	v, err := lv.LiveVersion(ctx, "acme")
	if err != nil {
		t.Fatalf("LiveVersion: %v", err)
	}
	defer v.Close()
	if files := v.Files(); len(files) != 2 || v.ID() != dep.Version {
		t.Errorf("LiveVersion = version %s with %d files, want version %s with 2", v.ID(), len(files), dep.Version)
	}
	if _, err := lv.LiveVersion(ctx, "other"); !errors.Is(err, preview.ErrNoVersion) {
		t.Errorf("LiveVersion of a project never published: err = %v, want ErrNoVersion", err)
	}
	if _, err := lv.LiveVersion(ctx, "../acme"); !errors.Is(err, tenant.ErrInvalid) {
		t.Errorf("LiveVersion of an invalid name: err = %v, want tenant.ErrInvalid", err)
	}
}

func testDeployServes(t *testing.T, in Instance) {
	site := preview.Site{Project: "acme", Thread: "t1"}
	src := t.TempDir()
	writeTree(t, src, map[string]string{"index.html": "home", "about/index.html": "about"})
	dep := deploy(t, in, site, src)
	if len(dep.URLs) != 2 || !strings.Contains(dep.URLs[0], site.Thread) || strings.Contains(dep.URLs[1], site.Thread) {
		t.Errorf("URLs = %q, want the thread's URL, then the project's latest", dep.URLs)
	}
	if dep.Version == "" || dep.Written != 2 {
		t.Errorf("first deploy = %+v, want a version and 2 files written", dep)
	}
	for _, latest := range []bool{false, true} {
		expect(t, in, site, latest, "/", 200, "home")
		expect(t, in, site, latest, "/about/", 200, "about")
		expect(t, in, site, latest, "/missing/", 404, "")
	}
}

func testDeployCounts(t *testing.T, in Instance) {
	site := preview.Site{Project: "acme", Thread: "t1"}
	src := t.TempDir()
	writeTree(t, src, pages(1000, "v1"))
	if dep := deploy(t, in, site, src); dep.Written != 1000 || dep.Unchanged != 0 || dep.Deleted != 0 {
		t.Fatalf("first deploy = %+v, want 1000 written", dep)
	}
	// A build rewrites every file; only one page's content changes.
	files := pages(1000, "v1")
	files["blog/00/post-007/index.html"] = "<p>v2</p>"
	writeTree(t, src, files)
	dep := deploy(t, in, site, src)
	if dep.Written != 1 || dep.Unchanged != 999 || dep.Deleted != 0 || dep.Bytes != int64(len("<p>v2</p>")) {
		t.Fatalf("deploy changing one page = %+v, want 1 written (9 bytes), 999 unchanged", dep)
	}
	for _, latest := range []bool{false, true} {
		expect(t, in, site, latest, "/blog/00/post-007/", 200, "<p>v2</p>")
	}
	if err := os.RemoveAll(filepath.Join(src, "blog/00/post-009")); err != nil {
		t.Fatal(err)
	}
	if dep := deploy(t, in, site, src); dep.Written != 0 || dep.Unchanged != 999 || dep.Deleted != 1 {
		t.Fatalf("deploy deleting one page = %+v, want 999 unchanged, 1 deleted", dep)
	}
	for _, latest := range []bool{false, true} {
		expect(t, in, site, latest, "/blog/00/post-009/", 404, "")
	}
}

func testThreads(t *testing.T, in Instance) {
	a, b := preview.Site{Project: "acme", Thread: "alpha"}, preview.Site{Project: "acme", Thread: "beta"}
	srcA, srcB := t.TempDir(), t.TempDir()
	steps := []struct {
		site  preview.Site
		src   string
		write string
	}{{a, srcA, "alpha 1"}, {b, srcB, "beta 1"}, {a, srcA, "alpha 2"}}
	for _, s := range steps {
		writeTree(t, s.src, map[string]string{"index.html": s.write})
		deploy(t, in, s.site, s.src)
		expect(t, in, s.site, true, "/", 200, s.write) // latest follows the most recent deploy
	}
	expect(t, in, a, false, "/", 200, "alpha 2")
	expect(t, in, b, false, "/", 200, "beta 1")
	expect(t, in, preview.Site{Project: "other", Thread: "alpha"}, true, "/", 404, "")
}

func testInvalidSite(t *testing.T, in Instance) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"index.html": "x"})
	for _, site := range []preview.Site{{}, {Project: "acme"}, {Project: "Acme", Thread: "t"}, {Project: "acme", Thread: "../x"}, {Project: "a/b", Thread: "t"}, {Project: "acme", Thread: strings.Repeat("t", 64)}} {
		if _, err := in.Target.Deploy(context.Background(), site, src); !errors.Is(err, tenant.ErrInvalid) {
			t.Errorf("Deploy(%+v) = %v, want tenant.ErrInvalid", site, err)
		}
	}
}

func testUnsafeSource(t *testing.T, in Instance) {
	site := preview.Site{Project: "acme", Thread: "t1"}
	src := t.TempDir()
	writeTree(t, src, map[string]string{"index.html": "home"})
	if err := os.Symlink("/etc", filepath.Join(src, "etc")); err != nil {
		t.Skip("no symlinks here:", err)
	}
	if _, err := in.Target.Deploy(context.Background(), site, src); !errors.Is(err, preview.ErrUnsafeSource) {
		t.Fatalf("Deploy with a symlink to /etc = %v, want ErrUnsafeSource", err)
	}
	expect(t, in, site, false, "/", 404, "")
	expect(t, in, site, false, "/etc/passwd", 404, "")
}

func testCancelled(t *testing.T, in Instance) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	src := t.TempDir()
	writeTree(t, src, map[string]string{"index.html": "x"})
	site := preview.Site{Project: "acme", Thread: "t1"}
	if _, err := in.Target.Deploy(ctx, site, src); err != context.Canceled {
		t.Errorf("Deploy with a cancelled ctx = %v, want context.Canceled unwrapped", err)
	}
	expect(t, in, site, false, "/", 404, "")
}

func testConcurrent(t *testing.T, in Instance) {
	site := preview.Site{Project: "acme", Thread: "t1"}
	const n = 6
	versions := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		src := t.TempDir()
		writeTree(t, src, map[string]string{"index.html": strconv.Itoa(i)})
		wg.Go(func() {
			dep, err := in.Target.Deploy(context.Background(), site, src)
			if err != nil {
				t.Error(err)
			}
			versions[i] = dep.Version
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, v := range versions {
		if seen[v] {
			t.Errorf("versions %q: %q reported twice", versions, v)
		}
		seen[v] = true
	}
	_, body, err := in.Get(context.Background(), site, false, "/")
	if i, convErr := strconv.Atoi(body); err != nil || convErr != nil || i < 0 || i >= n {
		t.Errorf("after concurrent deploys / = %q, %v; want one of the deployed pages", body, err)
	}
}

// testLinksOutRevealNothing: the build output is the job's and the deploy runs as root. A
// link out of the tree fails the same way whether or not its target exists, without naming
// the target: otherwise the deploy's error (which the agent may read in a repair turn) tells
// the job what exists where only root can look.
func testLinksOutRevealNothing(t *testing.T, in Instance) {
	secret := filepath.Join(t.TempDir(), "root-only")
	if err := os.MkdirAll(secret, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secret, "key"), []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	deploy := func(target string) string {
		src := t.TempDir()
		writeTree(t, src, map[string]string{"index.html": "home"})
		if err := os.Symlink(target, filepath.Join(src, "x.txt")); err != nil {
			t.Skip("no symlinks here:", err)
		}
		_, err := in.Target.Deploy(context.Background(), preview.Site{Project: "acme", Thread: "t1"}, src)
		if !errors.Is(err, preview.ErrUnsafeSource) {
			t.Fatalf("Deploy with x.txt -> %s = %v, want ErrUnsafeSource", target, err)
		}
		return err.Error()
	}
	exists := deploy(filepath.Join(secret, "key"))
	absent := deploy(filepath.Join(secret, "nothing"))
	if exists != absent {
		t.Errorf("a link to an existing file fails with %q, to a missing one with %q: the job learns what exists", exists, absent)
	}
	for _, msg := range []string{exists, absent, deploy("../../../../../../.." + secret + "/key")} {
		if strings.Contains(msg, "root-only") {
			t.Errorf("the error names the link's target: %q", msg)
		}
	}
}

// testHugeSparseFile: a terabyte of holes costs the job nothing; reading it (to hash, store or
// upload it) would take the deploy the better part of an hour. The deploy ends with its
// context instead.
func testHugeSparseFile(t *testing.T, in Instance) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{"index.html": "home"})
	f, err := os.Create(filepath.Join(src, "huge.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(1 << 40); err != nil {
		t.Skip("no sparse files here:", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := in.Target.Deploy(ctx, preview.Site{Project: "acme", Thread: "t1"}, src)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Deploy of a terabyte file within two seconds succeeded")
		}
	case <-time.After(2 * time.Minute): // generous: the deploy's context ended long before
		t.Fatal("the deploy goes on reading the huge file after its context ended")
	}
}
