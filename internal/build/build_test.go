package build

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/reaper"
)

func TestMain(m *testing.M) {
	reaper.Main()
	os.Exit(m.Run())
}

func TestSatisfies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		version, rng string
		want         bool
	}{
		{"v20.20.2", ">=22.12.0", false},
		{"v22.12.0", ">=22.12.0", true},
		{"v20.20.2", ">=18", true},
		{"v20.20.2", "^20.10", true},
		{"v21.0.0", "^20.10", false},
		{"v20.20.2", "20.x", true},
		{"v20.20.2", "22", false},
		{"v20.20.2", ">=18 <21", true},
		{"v20.20.2", "18 || >=22", false},
		{"v22.1.0", "18 || >=22", true},
		{"v20.20.2", "~20.20.0", true},
	}
	for _, c := range cases {
		if got, err := satisfies(c.version, c.rng); err != nil || got != c.want {
			t.Errorf("satisfies(%s, %q) = %v, %v; want %v", c.version, c.rng, got, err, c.want)
		}
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	_ = os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDetect(t *testing.T) {
	t.Parallel()
	static := t.TempDir()
	if p := Detect(static, "", ""); p.Node || p.Command != "" || p.OutputDir != "." {
		t.Fatalf("static site plan %+v", p)
	}
	node := t.TempDir()
	write(t, filepath.Join(node, "package.json"), `{}`)
	if p := Detect(node, "", ""); !p.Node || p.Command != "npm run build" || p.OutputDir != "dist" {
		t.Fatalf("node site plan %+v", p)
	}
	eleventy := t.TempDir()
	write(t, filepath.Join(eleventy, "package.json"), `{}`)
	write(t, filepath.Join(eleventy, "eleventy.config.js"), `export default function () {}`)
	if p := Detect(eleventy, "", ""); !p.Node || p.Command != "npm run build" || p.OutputDir != "_site" {
		t.Fatalf("eleventy site plan %+v", p)
	}
	hugo := t.TempDir()
	write(t, filepath.Join(hugo, "hugo.toml"), `title = 'x'`)
	if p := Detect(hugo, "", ""); p.Node || p.Command != "hugo" || p.OutputDir != "public" {
		t.Fatalf("hugo site plan %+v", p)
	}
	if p := Detect(hugo, "hugo --minify", "out"); p.Command != "hugo --minify" || p.OutputDir != "out" {
		t.Fatalf("hugo site plan with the project's overrides %+v", p)
	}
}

func TestNodeTooOldNamesBothVersions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "package.json"), `{"engines":{"node":">=99.1.0"}}`)
	_, err := Run(context.Background(), dir, Detect(dir, "", ""), Config{StateDir: t.TempDir()})
	if !errors.Is(err, ErrBuild) || !strings.Contains(err.Error(), ">=99.1.0") || !strings.Contains(err.Error(), "this worker has v") {
		t.Fatalf("error %v does not name both versions", err)
	}
}

// TestInstallOnlyWhenLockfileChanges runs real npm on a package with no dependencies.
func TestInstallOnlyWhenLockfileChanges(t *testing.T) {
	t.Parallel()
	dir, state := t.TempDir(), t.TempDir()
	write(t, filepath.Join(dir, "package.json"), `{"name":"s","version":"1.0.0","scripts":{"build":"mkdir -p dist && echo built > dist/index.html"}}`)
	write(t, filepath.Join(dir, "package-lock.json"), `{"name":"s","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{"":{"name":"s","version":"1.0.0"}}}`)
	plan := Detect(dir, "", "")
	first, err := Run(context.Background(), dir, plan, Config{StateDir: state})
	if err != nil {
		t.Fatalf("first build: %v\n%s", err, first.Log)
	}
	_ = os.MkdirAll(filepath.Join(dir, "node_modules"), 0o755)
	second, err := Run(context.Background(), dir, plan, Config{StateDir: state})
	if err != nil || !first.Installed || second.Installed {
		t.Fatalf("installed first=%v second=%v err=%v; want only the first", first.Installed, second.Installed, err)
	}
	if data, _ := os.ReadFile(filepath.Join(second.OutputDir, "index.html")); strings.TrimSpace(string(data)) != "built" {
		t.Fatalf("output %q", data)
	}
}

func TestBuildFailureAndTimeout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	res, err := Run(context.Background(), dir, Plan{Command: "echo 'Error: bad frontmatter in index.md' >&2; exit 2", OutputDir: "."}, Config{StateDir: t.TempDir()})
	if !errors.Is(err, ErrBuild) || !strings.Contains(res.Log, "bad frontmatter") {
		t.Fatalf("failed build: err %v log %q", err, res.Log)
	}
	start := time.Now()
	_, err = Run(context.Background(), dir, Plan{Command: "sleep 30", OutputDir: "."}, Config{StateDir: t.TempDir(), Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "timed out") || time.Since(start) > 10*time.Second {
		t.Fatalf("timeout: %v after %s", err, time.Since(start))
	}
}
