package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/agent"
)

// TestAgentLauncherMissingDependencyIsSetup: an agent CLI whose npm launcher cannot find its
// platform package (Codex without @openai/codex-linux-x64) prints node's error and no event.
// Running it again fails the same way, whatever the owner writes: the run is a setup failure.
// A CLI that started and then printed such a line (a tool's output) is not.
func TestAgentLauncherMissingDependencyIsSetup(t *testing.T) {
	t.Parallel()
	launcher := filepath.Join(t.TempDir(), "codex")
	script := "#!/bin/sh\ncat >/dev/null\n" +
		`echo "Error: Missing optional dependency @openai/codex-linux-x64. Reinstall Codex: npm install -g @openai/codex@latest" >&2` + "\nexit 1\n"
	if err := os.WriteFile(launcher, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := agent.Run(t.Context(), agent.Spec{Kind: agent.KindCodex, Command: launcher}, agent.Request{Dir: t.TempDir(), Prompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || !strings.Contains(res.Setup, "Missing optional dependency @openai/codex-linux-x64") {
		t.Fatalf("setup %q (error %q); want the missing dependency named", res.Setup, res.Error)
	}

	started := filepath.Join(t.TempDir(), "codex")
	script = "#!/bin/sh\ncat >/dev/null\n" + `echo '{"type":"thread.started","thread_id":"t1"}'` + "\n" +
		`echo "ModuleNotFoundError: No module named 'pandas'"` + "\nexit 1\n"
	if err := os.WriteFile(started, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err = agent.Run(t.Context(), agent.Spec{Kind: agent.KindCodex, Command: started}, agent.Request{Dir: t.TempDir(), Prompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Setup != "" {
		t.Fatalf("a started agent's tool output made the run a setup failure: %q", res.Setup)
	}
}
