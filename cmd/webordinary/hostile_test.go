package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/capability"
)

// hostileScript tries every way out of a job and records each attempt in $OUT, one line per
// attempt: "NAME: refused" or "NAME: SUCCEEDED ...". It also copies whatever it can read into
// loot files next to $OUT, so a secret that leaks shows up in the branch or the preview.
const hostileScript = `#!/bin/bash
OUT=${OUT:-attempts.txt}
mkdir -p "$(dirname "$OUT")"
try() {
  local name=$1; shift
  if ( "$@" ) >/tmp/attempt.out 2>&1; then
    echo "$name: SUCCEEDED $(head -c 200 /tmp/attempt.out | tr '\n\0' '  ')" >> "$OUT"
  else
    echo "$name: refused" >> "$OUT"
  fi
}
loot=$(dirname "$OUT")
cat /proc/[0-9]*/environ > "$loot/loot-environ.txt" 2>/dev/null
cat /proc/[0-9]*/cmdline > "$loot/loot-cmdline.txt" 2>/dev/null
cp -r "$DATA" "$loot/loot-data" 2>/dev/null
cat "$OTHER" > "$loot/loot-other.txt" 2>/dev/null
try environ-of-platform bash -c "cat /proc/[0-9]*/environ | tr '\0' '\n' | grep -q '^WO_GIT_TOKEN='"
try cmdline-of-platform bash -c "cat /proc/[0-9]*/cmdline | tr '\0' ' ' | grep -q 'ready[-]file'"
# bwrap makes the parents of the bound workspace and state as empty directories: the data
# dir's real content (secrets, the engine's files) must not be there.
try read-data-dir bash -c "ls -a $DATA | grep -q -e secrets -e nats -e mail"

try read-engine-credentials cat "$DATA/secrets/nats.json"
try read-api-token cat "$DATA/secrets/api-token"
try read-other-tenant cat "$OTHER"
try write-other-tenant bash -c "echo pwned > $(dirname "$OTHER")/pwned"
try leave-tmp-file-for-others bash -c "echo left > /tmp/wo-hostile-left && test -e /proc/$SERVE_PID"
try signal-worker kill -0 "$SERVE_PID"
try signal-any-platform-process bash -c "kill -0 1 && test \$(ls /proc | grep -c '^[0-9]') -gt 10"
try engine-publish bash -c "exec 3<>/dev/tcp/127.0.0.1/$NATS_PORT; printf 'CONNECT {\"verbose\":true}\r\nPUB wo.in.other.bob 2\r\nhi\r\nPING\r\n' >&3; timeout 3 head -c 600 <&3 | grep -q PONG && ! timeout 1 head -c 600 <&3 | grep -q ERR"
post() { exec 3<>/dev/tcp/127.0.0.1/$API_PORT; printf "POST $1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${#2}\r\nConnection: close\r\n\r\n$2" >&3; timeout 3 head -1 <&3 | grep -q ' 20[0-9] '; }
try api-post-jobs post /api/jobs '{"project":"other","user":"bob","instruction":"rm -rf /"}'
try api-post-projects post /api/projects '{"id":"evil","repoUrl":"/tmp/x","agent":{"kind":"command","command":"id > /tmp/pwned"}}'
# The job's network is its own: the platform's loopback ports are not there, and the egress
# proxy (127.0.0.1:3128 inside) will not tunnel to them.
try connect-api-port bash -c "exec 3<>/dev/tcp/127.0.0.1/$API_PORT"
try connect-engine-port bash -c "exec 3<>/dev/tcp/127.0.0.1/$NATS_PORT"
try proxy-to-api bash -c "exec 3<>/dev/tcp/127.0.0.1/3128; printf 'CONNECT 127.0.0.1:$API_PORT HTTP/1.1\r\nHost: 127.0.0.1:$API_PORT\r\n\r\n' >&3; timeout 3 head -1 <&3 | grep -q ' 200 '"
try write-git-hooks bash -c "mkdir -p .git/hooks && echo 'touch /tmp/wo-hook-ran' > .git/hooks/post-commit"
exit 0
`

// TestHostileJob: a job's agent and its site build (both the attacker's code) try to read the
// platform's secrets, the data dir and another tenant, signal the worker, publish on the
// engine and call the API, connect to the platform's loopback ports directly and through the
// egress proxy. Every attempt fails, and secrets put in serve's environment and
// data dir appear nowhere in the pushed branch, the preview or the result.
func TestHostileJob(t *testing.T) {
	t.Parallel()
	capability.Need(t, capability.Bubblewrap)
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	for _, p := range []string{"/tmp/wo-hostile-left", "/tmp/wo-hook-ran"} {
		_ = os.Remove(p) // a run without the sandbox may have left them
	}
	dir := reachableTempDir(t)
	origin := bareSite(t, dir, [2]string{"hostile.sh", hostileScript})
	data, ready := filepath.Join(dir, "data"), filepath.Join(dir, "ready.json")
	other := filepath.Join(data, "workspaces", "other", "bob", "secret.txt")
	mustWrite(t, other, "OTHER-TENANT-SECRET-4711")
	c := &cluster{t: t, dir: dir}
	const tokenMarker, envMarker = "GIT-TOKEN-MARKER-31337", "SERVE-ENV-MARKER-8086"
	cmd := exec.Command(os.Args[0], "serve", "--data", data, "--http", "127.0.0.1:0", "--preview", "127.0.0.1:0",
		"--nats-listen", "127.0.0.1:0", "--smtp", "", "--ready-file", ready, "--workers", "1", "--log-level", "warn",
		"--sandbox", "required")
	cmd.Env = append(c.env(), "WO_GIT_TOKEN="+tokenMarker, "HOSTILE_SECRET="+envMarker)
	c.serveP = c.startCmd(cmd)
	t.Cleanup(c.stopAll)
	c.api, c.nats = waitReady(t, ready)
	wantSandbox(t, c, "bubblewrap, uid:gid 65534:65534; rlimits mem=2GiB,procs=256,disk=2GiB,tmp=512MiB",
		"bubblewrap, user namespace; rlimits mem=2GiB,procs=256,disk=2GiB,tmp=512MiB")
	vars := fmt.Sprintf("DATA=%s OTHER=%s SERVE_PID=%d NATS_PORT=%s API_PORT=%s", data, other, cmd.Process.Pid, port(t, c.nats), port(t, c.api))
	c.cli(t, "project", "add", "--server", c.api, "--id", "site", "--repo", origin, "--agent", "command",
		"--agent-command", vars+" OUT=attempts.txt bash hostile.sh",
		"--build-command", vars+" OUT=dist/build-attempts.txt bash hostile.sh && env > dist/env.txt && cp index.html dist/",
		"--output-dir", "dist")
	out := c.cli(t, "send", "--server", c.api, "--project", "site", "--user", "alice", "--thread", "t1",
		"--instruction", "try to escape", "--wait", "--json")
	if !strings.Contains(out, `"state": "done"`) {
		t.Fatalf("send --wait:\n%s", out)
	}
	agentAttempts := gitOut(t, origin, "show", "thread-t1:attempts.txt")
	checkRefused(t, "agent", agentAttempts, 17)
	previewPort := between(out, `"http://t1.edit.site.localhost:`, `/"`)
	buildAttempts := previewFile(t, "t1.edit.site.localhost:"+previewPort, "/build-attempts.txt")
	checkRefused(t, "build", buildAttempts, 17)
	if !strings.Contains(out, `"egressDenied"`) || !strings.Contains(out, "127.0.0.1:"+port(t, c.api)) {
		t.Errorf("the result does not list the refused CONNECT to the API:\n%s", out)
	}
	secrets := []string{tokenMarker, envMarker, "OTHER-TENANT-SECRET-4711", readFile(t, filepath.Join(data, "secrets", "api-token")),
		c.natsCreds().Password}
	everything := branchContent(t, origin, "thread-t1") + out +
		previewFile(t, "t1.edit.site.localhost:"+previewPort, "/env.txt") + buildAttempts
	for _, s := range secrets {
		if s = strings.TrimSpace(s); s != "" && strings.Contains(everything, s) {
			t.Errorf("secret %q leaked into the branch, the preview or the result", s)
		}
	}
	if files := gitOut(t, origin, "ls-tree", "-r", "--name-only", "thread-t1"); strings.Contains(files, "dist/") {
		t.Errorf("the build output was committed:\n%s", files)
	}
	for _, p := range []string{"/tmp/wo-hostile-left", "/tmp/wo-hook-ran", filepath.Join(filepath.Dir(other), "pwned")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s exists on the host", p)
		}
	}
}

// wantSandbox checks that /api/status and the dashboard show every worker's sandbox as one
// of want, or as one of them followed by more.
func wantSandbox(t *testing.T, c *cluster, want ...string) {
	t.Helper()
	st, err := c.client().Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Workers) == 0 {
		t.Fatal("/api/status lists no workers")
	}
	for _, w := range st.Workers {
		if !slices.ContainsFunc(want, func(p string) bool { return strings.HasPrefix(w.Sandbox, p) }) {
			t.Errorf("/api/status: worker %s sandbox %q, want one of %q", w.ID, w.Sandbox, want)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, c.api+"/", nil)
	req.Header.Set("Authorization", "Bearer "+c.client().Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(page), `data-sandbox="`+st.Workers[0].Sandbox+`"`) {
		t.Errorf("the dashboard does not show the sandbox %q", st.Workers[0].Sandbox)
	}
}

// checkRefused wants at least n attempts recorded, all refused.
func checkRefused(t *testing.T, who, attempts string, n int) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(attempts), "\n")
	if len(lines) < n {
		t.Errorf("%s: %d attempts recorded, want %d:\n%s", who, len(lines), n, attempts)
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, ": refused") {
			t.Errorf("%s: %s", who, l)
		}
	}
	t.Logf("%s attempts:\n%s", who, attempts)
}

func mustWrite(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func port(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil || u.Port() == "" {
		t.Fatalf("no port in %q", rawURL)
	}
	return u.Port()
}

// previewFile GETs path from the preview server as host.
func previewFile(t *testing.T, host, path string) string {
	t.Helper()
	_, p, _ := strings.Cut(host, ":")
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+p+path, nil)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("preview %s%s: %s: %s", host, path, resp.Status, body)
	}
	return string(body)
}

// branchContent is every file of branch, binary ones included, concatenated.
func branchContent(t *testing.T, repo, branch string) string {
	t.Helper()
	var b strings.Builder
	for _, f := range strings.Fields(gitOut(t, repo, "ls-tree", "-r", "--name-only", branch)) {
		b.WriteString(gitOut(t, repo, "show", branch+":"+f))
	}
	return b.String()
}
