package shots_test

import (
	"cmp"
	"context"
	"image"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "image/jpeg"
	_ "image/png"

	"github.com/webordinary/webordinary/internal/capability"
	"github.com/webordinary/webordinary/internal/preview"
	"github.com/webordinary/webordinary/internal/reaper"
	"github.com/webordinary/webordinary/internal/sandbox"
	"github.com/webordinary/webordinary/internal/shots"
)

func TestMain(m *testing.M) {
	reaper.Main() // the browser starts under the reaper's supervisor, a re-exec of this binary
	os.Exit(m.Run())
}

// fixture is a preview directory with one thread and a shooter.
type fixture struct {
	t    testing.TB
	dir  *preview.Dir
	site preview.Site
	src  string
	sh   *shots.Shooter
}

// setup skips the test when no Chromium is installed.
func setup(t testing.TB, cfg shots.Config) *fixture {
	t.Helper()
	capability.Need(t, capability.Chromium)
	d, err := preview.NewDir(preview.DirConfig{Root: filepath.Join(t.TempDir(), "previews")})
	if err != nil {
		t.Fatal(err)
	}
	// A root the job user can enter, so the browser runs under the job limits as in serve
	// (the limits shim is this test binary, copied there).
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sb, err := sandbox.New(sandbox.Config{Roots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("browser sandbox: %s", sb)
	cfg.Dir, cfg.Sandbox = filepath.Join(t.TempDir(), "shots"), sb
	// Budgets for a loaded machine, unless the test is about them: Chromium on two busy cores
	// takes many times the production budgets to load and render.
	cfg.PageBudget = cmp.Or(cfg.PageBudget, time.Minute)
	cfg.Budget = cmp.Or(cfg.Budget, 5*time.Minute)
	if _, bench := t.(*testing.B); !bench || os.Getenv("SHOTS_BENCH_LOG") != "" {
		cfg.Logger = testLogger(t)
	}
	sh, err := shots.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, dir: d, site: preview.Site{Project: "acme", Thread: "t1"}, src: t.TempDir(), sh: sh}
}

// deploy writes files into the site's source (on top of what is there) and deploys it.
func (f *fixture) deploy(files map[string]string) preview.Deployment {
	f.t.Helper()
	for name, body := range files {
		p := filepath.Join(f.src, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			f.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
	dep, err := f.dir.Deploy(context.Background(), f.site, f.src)
	if err != nil {
		f.t.Fatal(err)
	}
	return dep
}

// shoot takes the pictures of dep against the version it replaced.
func (f *fixture) shoot(job string, dep preview.Deployment) (shots.Report, error) {
	f.t.Helper()
	return f.shootWarm(job, dep, nil)
}

// shootWarm is shoot with a browser started ahead.
func (f *fixture) shootWarm(job string, dep preview.Deployment, warm *shots.Warm) (shots.Report, error) {
	f.t.Helper()
	req := shots.Request{JobID: job, After: f.version(dep.Version), Warm: warm}
	if !dep.Previous.IsZero() {
		req.Before = f.version(dep.Previous.Version)
	}
	return f.sh.Shoot(context.Background(), req)
}

func (f *fixture) version(id string) *preview.Version {
	f.t.Helper()
	v, err := f.dir.Version(context.Background(), f.site, id)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { v.Close() })
	return v
}

// picture decodes a stored picture of job.
func (f *fixture) picture(job, name string) image.Image {
	f.t.Helper()
	data, err := f.sh.Store().Read(job, name)
	if err != nil {
		f.t.Fatal(err)
	}
	img, _, err := image.Decode(bytesReader(data))
	if err != nil {
		f.t.Fatalf("decode %s: %v", name, err)
	}
	return img
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
