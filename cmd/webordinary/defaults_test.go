package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/app"
)

// TestDefaultsWorkFromAnywhereWhilePortsAreTaken holds the default addresses (8080, 8081,
// 2525, 4222; taken by this test, or already by someone else) and, with a fresh HOME and a
// relative working directory:
//   - serve with every default refuses at once, naming the busy address, without starting
//     anything or creating its data directory;
//   - serve with its default --data and ephemeral addresses completes a real job (the
//     pipeline: clone, agent, commit, push, preview) that project add and send --wait, also
//     with their default --data, submit;
//   - the demo (the README's first command) runs to its reply on ephemeral addresses.
//
// Not parallel: it holds fixed ports, and parallel tests wait until it is done.
func TestDefaultsWorkFromAnywhereWhilePortsAreTaken(t *testing.T) {
	for _, addr := range []string{app.DefaultHTTPAddr, app.DefaultPreviewAddr, app.DefaultSMTPAddr, app.DefaultEngineListen} {
		if ln, err := net.Listen("tcp", addr); err == nil { // else it is taken already, as wanted
			t.Cleanup(func() { _ = ln.Close() })
		}
	}
	dir := reachableTempDir(t)
	home := filepath.Join(dir, "home")
	work := filepath.Join(dir, "work", "sub")
	for _, d := range []string{home, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := &cluster{t: t, dir: work} // serve runs in work
	env := freshEnv(home)
	data := filepath.Join(home, ".local", "share", "webordinary")

	out, err := webordinaryIn(work, env, 20*time.Second, "serve")
	if err == nil || !strings.Contains(out, "cannot listen on "+app.DefaultHTTPAddr) {
		t.Fatalf("serve with every default address taken: %v\n%s", err, out)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("the failed start created %s (%v)", data, err)
	}

	origin := bareSite(t, dir)
	ready := filepath.Join(work, "ready.json")
	serve := exec.Command(os.Args[0], "serve", "--http", "127.0.0.1:0", "--preview", "127.0.0.1:0", "--smtp", "127.0.0.1:0",
		"--nats-listen", "127.0.0.1:0", "--ready-file", ready, "--workers", "1", "--log-level", "warn")
	serve.Env = env
	c.startCmd(serve)
	t.Cleanup(c.stopAll)
	c.api, _ = waitReady(t, ready)
	agent := `sed -i "s|Hello|$WO_INSTRUCTION|" index.html && echo "set the heading to: $WO_INSTRUCTION"`
	cliIn(t, work, env, "project", "add", "site", "--server", c.api, "--repo", origin, "--agent", "command", "--agent-command", agent)
	out = cliIn(t, work, env, "send", "--server", c.api, "--project", "site", "--user", "alice", "--thread", "t1", "--wait", "Baked from anywhere")
	if !strings.Contains(out, " done in ") {
		t.Fatalf("send --wait:\n%s", out)
	}
	if body := gitOut(t, origin, "show", "thread-t1:index.html"); !strings.Contains(body, "Baked from anywhere") {
		t.Fatalf("pushed index.html: %q", body)
	}
	if _, err := os.Stat(filepath.Join(data, "workspaces")); err != nil {
		t.Errorf("the default data directory holds no workspaces: %v", err)
	}

	out = cliIn(t, work, env, "demo", "--data", filepath.Join(dir, "demo"), "--http", "127.0.0.1:0", "--preview", "127.0.0.1:0",
		"--smtp", "127.0.0.1:0", "--agent", "demo", "--exit")
	if !strings.Contains(out, "result: done") {
		t.Fatalf("demo:\n%s", out)
	}
}

// freshEnv is this process's environment with HOME set to home, no XDG_DATA_HOME and no
// WO_* variable (so every default applies).
func freshEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WO_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_DATA_HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+home, "WO_TEST_AS_MAIN=1")
}

// webordinaryIn runs this binary as webordinary in dir and returns its combined output.
func webordinaryIn(dir string, env []string, within time.Duration, args ...string) (string, error) {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir, cmd.Env = dir, env
	timer := time.AfterFunc(within, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// cliIn runs a command that must succeed, in dir, and returns its output.
func cliIn(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	out, err := webordinaryIn(dir, env, 2*time.Minute, args...)
	if err != nil {
		t.Fatalf("webordinary %v: %v\n%s", args, err, out)
	}
	return out
}
