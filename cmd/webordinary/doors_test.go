package main

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestEngineAsksForCredentials: serve's engine refuses a local client without credentials
// (a job on this machine reaches loopback) and admits one with the generated ones, which
// live in a 0600 file in a 0700 directory and appear in no output.
func TestEngineAsksForCredentials(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "true", 0)
	if _, err := nats.Connect(c.nats, nats.MaxReconnects(0)); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("connect without credentials: %v, want an authorization error", err)
	}
	creds := c.natsCreds()
	nc, err := nats.Connect(c.nats, nats.UserInfo(creds.User, creds.Password), nats.MaxReconnects(0))
	if err != nil {
		t.Fatalf("connect with the generated credentials: %v", err)
	}
	nc.Close()
	wantMode(t, secretPath(c.data(), natsCredsFile), 0o600)
	wantMode(t, filepath.Dir(secretPath(c.data(), natsCredsFile)), 0o700|fs.ModeDir)
	for _, f := range []string{"procs.log", "ready.json"} {
		if out, _ := os.ReadFile(filepath.Join(c.dir, f)); strings.Contains(string(out), creds.Password) {
			t.Errorf("%s shows the engine password", f)
		}
	}
}

// TestWorkerJoinsWithDataDirCredentials: a worker process on serve's machine finds the
// engine's credentials in the data directory (WO_DATA) and runs a job.
func TestWorkerJoinsWithDataDirCredentials(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "echo done", 0)
	c.worker(1)
	ctx := context.Background()
	rec := c.submit(ctx, "site", "alice", "hello")
	if got := c.job(ctx, rec.Job.ID, 30*time.Second); got.Result == nil || got.Result.Summary == "" {
		t.Fatalf("job by the joined worker: %+v", got)
	}
}

// TestAPIDoors: every route checks the Host; /api/ needs the token and refuses cross-origin
// writes; /healthz stays open; CLI commands find the token in the data directory or take
// --token.
func TestAPIDoors(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "true", 0)
	token := c.client().Token
	wantMode(t, secretPath(c.data(), apiTokenFile), 0o600)
	cases := []struct {
		name, method, path, host, token string
		headers                         []string
		want                            int
	}{
		{"health without token", "GET", "/healthz", "", "", nil, http.StatusOK},
		{"health on a rebound name", "GET", "/healthz", "attacker.example", "", nil, http.StatusForbidden},
		{"status without token", "GET", "/api/status", "", "", nil, http.StatusUnauthorized},
		{"status", "GET", "/api/status", "localhost", token, nil, http.StatusOK},
		{"submit without token", "POST", "/api/jobs", "", "", nil, http.StatusUnauthorized},
		{"project without token", "PUT", "/api/projects/evil", "", "", nil, http.StatusUnauthorized},
		{"inspect without token", "POST", "/api/mail/inspect", "", "", nil, http.StatusUnauthorized},
		{"metrics without token", "GET", "/metrics", "", "", nil, http.StatusUnauthorized},
		{"dashboard without token", "GET", "/", "", "", nil, http.StatusUnauthorized},
		{"rebound name with token", "GET", "/api/status", "attacker.example:8080", token, nil, http.StatusForbidden},
		{"cross-origin submit", "POST", "/api/jobs", "", token, []string{"Origin", "http://attacker.example"}, http.StatusForbidden},
		{"cross-site submit", "POST", "/api/jobs", "", token, []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(tc.method, c.api+tc.path, strings.NewReader(`{}`))
		if tc.host != "" {
			req.Host = tc.host
		}
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		for i := 0; i+1 < len(tc.headers); i += 2 {
			req.Header.Set(tc.headers[i], tc.headers[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.want {
			t.Errorf("%s: %s, want %d", tc.name, res.Status, tc.want)
		}
	}
	// The CLI: the data directory's token (WO_DATA), --token, and neither.
	c.cli(t, "project", "add", "--server", c.api, "--id", "site", "--repo", "/nowhere", "--check-repo=false", "--agent", "command", "--agent-command", "true")
	elsewhere := t.TempDir()
	out := c.cli(t, "project", "list", "--server", c.api, "--data", elsewhere, "--token", token)
	if !strings.Contains(out, "site") {
		t.Fatalf("project list --token:\n%s", out)
	}
	cmd := exec.Command(os.Args[0], "send", "--server", c.api, "--data", elsewhere, "--project", "site", "--user", "alice", "--instruction", "x")
	cmd.Env = c.env()
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "wants its API token") {
		t.Fatalf("send without a token: %v\n%s", err, out)
	}
}

// TestTokenShownOnFirstStartOnly: serve prints a generated token on its first start, not later.
func TestTokenShownOnFirstStartOnly(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "true", 0)
	token := c.client().Token
	first, _ := os.ReadFile(filepath.Join(c.dir, "procs.log"))
	if !strings.Contains(string(first), "?token="+token) {
		t.Fatalf("first start does not show the token:\n%s", first)
	}
	_ = c.serveP.Process.Kill()
	for deadline := time.Now().Add(10 * time.Second); alive(c.serveP.Process.Pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("serve did not stop")
		}
	}
	_ = os.Remove(filepath.Join(c.dir, "procs.log"))
	ready := filepath.Join(c.dir, "ready2.json")
	c.start("serve", "--data", c.data(), "--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0", "--ready-file", ready,
		"--workers", "0", "--preview", "", "--smtp", "", "--log-level", "warn")
	c.api, _ = waitReady(t, ready)
	if c.client().Token != token {
		t.Fatal("a restart changed the token")
	}
	again, _ := os.ReadFile(filepath.Join(c.dir, "procs.log"))
	if strings.Contains(string(again), token) {
		t.Fatalf("a later start shows the token:\n%s", again)
	}
}

func wantMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode() & (fs.ModePerm | fs.ModeDir); got != want {
		t.Errorf("%s: mode %v, want %v", path, got, want)
	}
}
