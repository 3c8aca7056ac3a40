package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIAgainstServe: the CLI's checks and its human output against a real serve started
// with mail.local_testing: project add checks the repository and refuses to overwrite,
// update changes only what is given, send refuses an unknown project, send --wait prints the
// result for people, and `mail send` gets an instruction run by email in one command.
func TestCLIAgainstServe(t *testing.T) {
	t.Parallel()
	dir := reachableTempDir(t)
	origin := bareSite(t, dir)
	ready := filepath.Join(dir, "ready.json")
	c := &cluster{t: t, dir: dir}
	c.serveP = c.start("serve", "--data", c.data(), "--http", "127.0.0.1:0", "--preview", "127.0.0.1:0",
		"--nats-listen", "", "--smtp", "127.0.0.1:0", "--ready-file", ready, "--workers", "1", "--log-level", "warn",
		"--set", "mail.local_testing=true")
	t.Cleanup(c.stopAll)
	c.api, _ = waitReady(t, ready)
	smtpAddr := readyField(t, ready, "smtp")
	agent := `sed -i "s|Hello|$WO_INSTRUCTION|" index.html && echo "set the heading to: $WO_INSTRUCTION"`

	c.fails(t, "cannot be read from here", "project", "add", "site", "--server", c.api, "--repo", filepath.Join(dir, "nope.git"))
	out := c.cli(t, "project", "add", "site", "--server", c.api, "--repo", origin, "--agent", "command", "--agent-command", agent,
		"--sender", "owner@example.com=owner")
	if !strings.Contains(out, "project site added") || !strings.Contains(out, "owner@example.com=owner") {
		t.Fatalf("project add:\n%s", out)
	}
	c.fails(t, "exists", "project", "add", "site", "--server", c.api, "--repo", origin)
	// An agent command the sandbox will not see is saved, with a warning that says the fix.
	warned := exec.Command(os.Args[0], "project", "add", "hidden", "--server", c.api, "--repo", origin, "--agent", "command",
		"--agent-command", "/srv/wo-edit.sh --fast")
	warned.Env = c.env()
	if out, err := warned.CombinedOutput(); err != nil || !strings.Contains(string(out), "add /srv to sandbox.read_only") {
		t.Fatalf("project add with a script under /srv: %v\n%s", err, out)
	}
	c.cli(t, "project", "update", "site", "--server", c.api, "--model", "m1")
	var p struct {
		Agent   struct{ Command, Model string }
		Senders map[string]string
	}
	if err := json.Unmarshal([]byte(c.cli(t, "project", "show", "site", "--server", c.api, "--json")), &p); err != nil ||
		p.Agent.Model != "m1" || p.Agent.Command != agent || p.Senders["owner@example.com"] != "owner" {
		t.Fatalf("after update: %+v %v", p, err)
	}

	c.fails(t, "project add nosuch", "send", "--server", c.api, "--project", "nosuch", "--user", "alice", "hi")
	out = c.cli(t, "send", "--server", c.api, "--project", "site", "--user", "alice", "--thread", "t1", "--wait", "Welcome")
	for _, want := range []string{" done in ", "tenant   site/alice (thread t1)", "files    M index.html", "preview  http://t1.edit.site.localhost:"} {
		if !strings.Contains(out, want) {
			t.Errorf("send --wait lacks %q:\n%s", want, out)
		}
	}
	if list := c.cli(t, "project", "list", "--server", c.api); !strings.Contains(list, "ID") || !strings.Contains(list, origin) {
		t.Errorf("project list:\n%s", list)
	}

	c.fails(t, "not registered", "mail", "send", "--server", c.api, "--smtp", smtpAddr, "--from", "stranger@example.com", "hi")
	out = c.cli(t, "mail", "send", "--server", c.api, "--smtp", smtpAddr, "--from", "owner@example.com", "--wait", "Fresh bread")
	if !strings.Contains(out, " done in ") || !strings.Contains(out, "site/owner") {
		t.Fatalf("mail send --wait:\n%s", out)
	}
	if body := gitOut(t, origin, "log", "--all", "--format=%s"); !strings.Contains(body, "Fresh bread") {
		t.Fatalf("the emailed instruction was not committed:\n%s", body)
	}
}

// fails runs a CLI command that must fail with want in its stderr.
func (c *cluster) fails(t *testing.T, want string, args ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = c.env()
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), want) {
		t.Fatalf("webordinary %v: want a failure saying %q, got %v:\n%s", args, want, err, out)
	}
}

func readyField(t *testing.T, file, key string) string {
	t.Helper()
	var r map[string]string
	raw, err := os.ReadFile(file)
	if err != nil || json.Unmarshal(raw, &r) != nil || r[key] == "" {
		t.Fatalf("%s in %s: %s %v", key, file, raw, err)
	}
	return r[key]
}
