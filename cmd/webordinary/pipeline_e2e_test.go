package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeEditsASiteEndToEnd: serve with the pipeline, a project on a local bare repository
// and a command agent; `send --wait` ends in a pushed commit on thread-<id> and a live preview.
func TestServeEditsASiteEndToEnd(t *testing.T) {
	t.Parallel()
	dir := reachableTempDir(t)
	origin := bareSite(t, dir)
	ready := filepath.Join(dir, "ready.json")
	c := &cluster{t: t, dir: dir}
	c.serveP = c.start("serve", "--data", filepath.Join(dir, "data"), "--http", "127.0.0.1:0", "--preview", "127.0.0.1:0",
		"--nats-listen", "", "--smtp", "127.0.0.1:0", "--ready-file", ready, "--workers", "2", "--log-level", "warn")
	t.Cleanup(c.stopAll)
	c.api, _ = waitReady(t, ready)
	agent := `sed -i "s|Hello|$WO_INSTRUCTION|" index.html && echo "set the heading to: $WO_INSTRUCTION"`
	c.cli(t, "project", "add", "--server", c.api, "--id", "site", "--repo", origin, "--agent", "command", "--agent-command", agent)
	out := c.cli(t, "send", "--server", c.api, "--project", "site", "--user", "alice", "--thread", "t1",
		"--instruction", "Welcome to our bakery", "--wait", "--json")
	if !strings.Contains(out, `"state": "done"`) {
		t.Fatalf("send --wait:\n%s", out)
	}
	if body := gitOut(t, origin, "show", "thread-t1:index.html"); !strings.Contains(body, "Welcome to our bakery") {
		t.Fatalf("pushed index.html: %q", body)
	}
	preview := between(out, `"http://t1.edit.site.localhost:`, `/"`)
	if preview == "" {
		t.Fatalf("no thread preview URL in:\n%s", out)
	}
	if body := fetchPreview(t, "t1.edit.site.localhost:"+preview); !strings.Contains(body, "Welcome to our bakery") {
		t.Fatalf("preview serves %q", body)
	}
	metrics := fetch(t, c.api+"/metrics", c.client().Token)
	for _, want := range []string{`webordinary_jobs_total{state="done"} 1`, `webordinary_claims_total{outcome="acquired"}`,
		`webordinary_stage_duration_seconds_count{stage="push"} 1`, `webordinary_job_duration_seconds_count{state="done"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// fetch GETs url with a bearer token.
func fetch(t *testing.T, url, token string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// bareSite makes a bare repository whose main holds index.html and files (name → content).
func bareSite(t *testing.T, dir string, files ...[2]string) string {
	t.Helper()
	bare, seed := filepath.Join(dir, "origin.git"), filepath.Join(dir, "seed")
	for _, args := range [][]string{{"init", "--quiet", "--bare", "--initial-branch=main", bare}, {"init", "--quiet", "--initial-branch=main", seed}} {
		gitOut(t, dir, args...)
	}
	for _, f := range append([][2]string{{"index.html", "<h1>Hello</h1>\n"}}, files...) {
		if err := os.WriteFile(filepath.Join(seed, f[0]), []byte(f[1]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitOut(t, seed, "add", "-A")
	gitOut(t, seed, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "init")
	gitOut(t, seed, "push", "--quiet", bare, "main")
	return bare
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// cli runs a webordinary command (this test binary) and returns its stdout.
func (c *cluster) cli(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = c.env()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	go func() { <-ctx.Done(); _ = cmd.Process.Kill() }()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("webordinary %v: %v\n%s\n%s", args, err, out, stderr.String())
	}
	return string(out)
}

func between(s, start, end string) string {
	_, rest, ok := strings.Cut(s, start)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, end)
	return v
}

func fetchPreview(t *testing.T, host string) string {
	t.Helper()
	return previewFile(t, host, "/")
}
