package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/agent"
)

// recorderScript stands in for the codex and opencode CLIs, which are not installed here: it
// records its arguments (NUL-separated), stdin and environment, prints a recorded event file
// and exits with $FAKE_EXIT.
const recorderScript = `#!/bin/sh
printf '%s\0' "$@" > "$FAKE_OUT/args"
cat > "$FAKE_OUT/stdin"
env > "$FAKE_OUT/env"
cat "$FAKE_EVENTS"
exit "${FAKE_EXIT:-0}"
`

// recorder is a fake agent binary and where it records its run.
type recorder struct {
	bin, out string
}

func newRecorder(t *testing.T) recorder {
	t.Helper()
	dir := t.TempDir()
	r := recorder{bin: filepath.Join(dir, "agent"), out: dir}
	if err := os.WriteFile(r.bin, []byte(recorderScript), 0o755); err != nil {
		t.Fatal(err)
	}
	return r
}

// env is what the request must carry for the script: it sees only the allowlist.
func (r recorder) env(t *testing.T, fixture, exit string) []string {
	t.Helper()
	events, err := filepath.Abs(filepath.Join("testdata", fixture))
	if err != nil {
		t.Fatal(err)
	}
	return []string{"FAKE_OUT=" + r.out, "FAKE_EVENTS=" + events, "FAKE_EXIT=" + exit}
}

func (r recorder) read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.out, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (r recorder) args(t *testing.T) string {
	return strings.ReplaceAll(strings.TrimSuffix(r.read(t, "args"), "\x00"), "\x00", " ")
}

func TestCodexProcess(t *testing.T) {
	t.Parallel()
	f, rec := setup(t), newRecorder(t)
	req := f.request("make the heading say Spring sale")
	req.SystemPrompt = "never touch .git"
	req.Session, req.Resume = "0199a213-81c0-7800-8aa1-bbab2a035a53", true
	req.Env = rec.env(t, "codex/success.jsonl", "0")
	res := run(t, context.Background(), agent.Spec{Kind: agent.KindCodex, Command: rec.bin, Model: "gpt-test"}, req)
	if !res.OK || res.Session != req.Session || res.Summary != `I changed the home page heading to "Spring sale".` {
		t.Fatalf("OK, Session, Summary = %v, %q, %q", res.OK, res.Session, res.Summary)
	}
	want := "exec --json --skip-git-repo-check --sandbox workspace-write -c check_for_update_on_startup=false -c analytics.enabled=false -c features.plugins=false --model gpt-test resume " + req.Session + " -"
	if got := rec.args(t); got != want {
		t.Errorf("args = %q, want %q", got, want)
	}
	if got := rec.read(t, "stdin"); got != "never touch .git\n\nmake the heading say Spring sale" {
		t.Errorf("stdin = %q", got)
	}
	env := envMap(rec.read(t, "env"))
	if env["CODEX_HOME"] != f.config || env["OPENAI_API_KEY"] != "test-openai-key" {
		t.Errorf("CODEX_HOME, OPENAI_API_KEY = %q, %q", env["CODEX_HOME"], env["OPENAI_API_KEY"])
	}
	for _, k := range []string{"ANTHROPIC_API_KEY", "WO_GIT_TOKEN", "AWS_SECRET_ACCESS_KEY"} {
		if _, ok := env[k]; ok {
			t.Errorf("codex saw %s", k)
		}
	}
}

func TestOpencodeProcess(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fixture, exit string
		wantOK        bool
		wantError     string
	}{
		{"opencode/success.jsonl", "0", true, ""},
		{"opencode/error.jsonl", "1", false, "invalid x-api-key"},
		{"opencode/rejected_tool.jsonl", "0", false, "denied permission for bash"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			t.Parallel()
			f, rec := setup(t), newRecorder(t)
			prompt := "-make the heading say \"Spring sale\"\n  $(keep) `this` verbatim\n"
			req := f.request(prompt)
			req.SystemPrompt = "rules"
			req.Env = rec.env(t, tt.fixture, tt.exit)
			res := run(t, context.Background(), agent.Spec{Kind: agent.KindOpencode, Command: rec.bin}, req)
			if res.OK != tt.wantOK || res.Session != "ses_494719016ffe85dkDMj0FPRbHK" {
				t.Fatalf("OK, Session = %v, %q", res.OK, res.Session)
			}
			assertContains(t, "Error", res.Error, tt.wantError)
			if got, want := rec.args(t), "run --format json"; got != want {
				t.Errorf("args = %q, want %q", got, want)
			}
			if got, want := rec.read(t, "stdin"), "rules\n\n"+prompt; got != want {
				t.Errorf("stdin = %q, want the prompt verbatim %q", got, want)
			}
			if env := envMap(rec.read(t, "env")); env["XDG_DATA_HOME"] != f.config {
				t.Errorf("XDG_DATA_HOME = %q, want %q", env["XDG_DATA_HOME"], f.config)
			}
		})
	}
}
