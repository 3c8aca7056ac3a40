package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/agent/agenttest"
	"github.com/webordinary/webordinary/internal/capability"
)

// TestCheckTurnInTheSandbox: a project with --check-turn, the fake Claude in the bubblewrap
// sandbox: in the check turn it reads the after-pictures (bound read-only into its jail),
// fixes the miss, and the commit and preview have the fix.
func TestCheckTurnInTheSandbox(t *testing.T) {
	t.Parallel()
	capability.Need(t, capability.Chromium)
	capability.Need(t, capability.Bubblewrap)
	dir := reachableTempDir(t)
	origin := bareSite(t, dir)
	ready := filepath.Join(dir, "ready.json")
	c := &cluster{t: t, dir: dir}
	c.serveP = c.start("serve", "--data", filepath.Join(dir, "data"), "--http", "127.0.0.1:0", "--preview", "127.0.0.1:0",
		"--nats-listen", "127.0.0.1:0", "--smtp", "", "--ready-file", ready, "--workers", "1", "--log-level", "warn",
		"--sandbox", "required")
	t.Cleanup(c.stopAll)
	c.api, c.nats = waitReady(t, ready)
	c.fails(t, "check turn needs an agent that can look at pictures", "project", "add", "--server", c.api, "--id", "site",
		"--repo", origin, "--agent", "command", "--agent-command", "true", "--check-turn")
	c.cli(t, "project", "add", "--server", c.api, "--id", "site", "--repo", origin, "--agent", "claude",
		"--agent-command", agenttest.BuildFakeClaude(t), "--check-turn")
	if show := c.cli(t, "project", "show", "site", "--server", c.api); !strings.Contains(show, "check turn  on") {
		t.Errorf("project show:\n%s", show)
	}
	const blue = `write index.html: <html><body style="margin:0"><div style="background:#0000ff;height:300px">Hello</div></body></html>`
	const green = `write index.html: <html><body style="margin:0"><div style="background:#00aa00;height:300px">Hello</div></body></html>`
	rec := c.sendThread(t.Context(), blue+"\non-images "+green)
	d := rec.Result.Report
	if d.Check == nil || !d.Check.Changed || d.Check.Pictures == 0 || !strings.Contains(d.Check.Summary, "looked at") {
		t.Fatalf("check: %+v", d.Check)
	}
	if body := gitOut(t, origin, "show", "thread-t1:index.html"); !strings.Contains(body, "#00aa00") {
		t.Errorf("the commit lacks the check turn's fix:\n%s", body)
	}
	if !strings.Contains(rec.Result.Summary, "I looked at the result and fixed") {
		t.Errorf("summary: %s", rec.Result.Summary)
	}
	t.Logf("stages (ms): %v; agent $%.2f", d.StagesMs, d.AgentCostUSD)
}
