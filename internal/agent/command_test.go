package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/agent"
)

func TestCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, command, prompt string
		wantOK                bool
		wantExit              int
		wantSummary           string
	}{
		{"success", "echo working; echo done", "", true, 0, "done"},
		{"stderr", "echo oops >&2; exit 1", "", false, 1, "oops"},
		{"failure", "echo half done; exit 3", "", false, 3, "half done"},
		{"no output", "exit 4", "", false, 4, "command exited with status 4"},
		{"prompt on stdin", `read line; echo "got $line"`, "make it blue", true, 0, "got make it blue"},
		{"prompt in WO_INSTRUCTION", `echo "got $WO_INSTRUCTION"`, "make it red", true, 0, "got make it red"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			req := f.request(tt.prompt)
			req.Session = "thread-session"
			res := run(t, context.Background(), agent.Spec{Kind: agent.KindCommand, Command: tt.command}, req)
			if res.OK != tt.wantOK || res.ExitCode != tt.wantExit || res.Summary != tt.wantSummary {
				t.Errorf("OK, ExitCode, Summary = %v, %d, %q; want %v, %d, %q",
					res.OK, res.ExitCode, res.Summary, tt.wantOK, tt.wantExit, tt.wantSummary)
			}
			if (res.Error == "") != tt.wantOK {
				t.Errorf("Error = %q", res.Error)
			}
			if res.Session != "thread-session" {
				t.Errorf("Session = %q, want it passed through", res.Session)
			}
		})
	}
}

func TestCommandEnv(t *testing.T) {
	t.Parallel()
	f := setup(t)
	req := f.request("the instruction")
	req.SystemPrompt = "the rules"
	res := run(t, context.Background(), agent.Spec{Kind: agent.KindCommand, Command: "env > env.txt"}, req)
	if !res.OK {
		t.Fatalf("Error = %q", res.Error)
	}
	env := envMap(f.read(t, "env.txt"))
	if env["WO_INSTRUCTION"] != "the instruction" || env["WO_SYSTEM_PROMPT"] != "the rules" {
		t.Errorf("WO_INSTRUCTION, WO_SYSTEM_PROMPT = %q, %q", env["WO_INSTRUCTION"], env["WO_SYSTEM_PROMPT"])
	}
	for _, k := range []string{"WO_GIT_TOKEN", "AWS_SECRET_ACCESS_KEY", "WO_TEST_NOT_PASSED", "WO_TEST_PASSED", "GORACE"} {
		if v, ok := env[k]; ok {
			t.Errorf("the command saw %s=%q", k, v)
		}
	}
}

// TestInterruptGraceThenKill: an agent that ignores SIGINT is killed, with everything it
// started, once the grace period is over.
func TestInterruptGraceThenKill(t *testing.T) {
	t.Parallel()
	f := setup(t)
	spec := agent.Spec{Kind: agent.KindCommand, InterruptGrace: 300 * time.Millisecond,
		Command: `trap '' INT; sleep 300 & echo $! > child.pid; echo started; wait`}
	req := f.request("")
	sig := newLineSignal("started")
	req.Output = sig
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelWhen(cancel, sig.arrived)
	res := run(t, ctx, spec, req)
	if !res.Interrupted || res.OK {
		t.Fatalf("Interrupted, OK = %v, %v", res.Interrupted, res.OK)
	}
	if res.ExitCode != 128+9 {
		t.Errorf("ExitCode = %d, want 137 (killed)", res.ExitCode)
	}
	assertGone(t, f.readPid(t, "child.pid"))
}

func TestOutputTail(t *testing.T) {
	t.Parallel()
	f := setup(t)
	res := run(t, context.Background(), agent.Spec{Kind: agent.KindCommand,
		Command: `i=0; while [ $i -lt 2000 ]; do echo "line $i"; i=$((i+1)); done; printf 'no newline'`}, f.request(""))
	if n := len(res.OutputTail); n > 4<<10 || n < 4<<10-16 {
		t.Errorf("len(OutputTail) = %d, want about 4 KiB", n)
	}
	if !strings.HasSuffix(res.OutputTail, "line 1999\nno newline") || res.Summary != "no newline" {
		t.Errorf("OutputTail ends %q, Summary = %q", res.OutputTail[len(res.OutputTail)-30:], res.Summary)
	}
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fake := fakeClaude(t)
	tests := []struct {
		name    string
		spec    agent.Spec
		req     agent.Request
		wantErr error
		wantMsg string
	}{
		{"claude missing", agent.Spec{Command: "wo-no-such-claude"}, agent.Request{Dir: dir},
			agent.ErrNotInstalled, "npm install -g @anthropic-ai/claude-code"},
		{"claude path missing", agent.Spec{Command: "/nonexistent/claude"}, agent.Request{Dir: dir},
			agent.ErrNotInstalled, "set the agent command"},
		{"codex missing", agent.Spec{Kind: agent.KindCodex, Command: "wo-no-such-codex"}, agent.Request{Dir: dir},
			agent.ErrNotInstalled, "npm install -g @openai/codex"},
		{"opencode missing", agent.Spec{Kind: agent.KindOpencode, Command: "wo-no-such-opencode"}, agent.Request{Dir: dir},
			agent.ErrNotInstalled, "npm install -g opencode-ai"},
		{"unknown kind", agent.Spec{Kind: "cursor"}, agent.Request{Dir: dir}, agent.ErrInvalid, "unknown kind"},
		{"no command", agent.Spec{Kind: agent.KindCommand}, agent.Request{Dir: dir}, agent.ErrInvalid, "shell command"},
		{"no dir", fake, agent.Request{}, agent.ErrInvalid, "working directory"},
		{"resume without session", fake, agent.Request{Dir: dir, Resume: true}, agent.ErrInvalid, "resume"},
		{"bad PassEnv", agent.Spec{Command: fake.Command, PassEnv: []string{"A=B"}}, agent.Request{Dir: dir}, agent.ErrInvalid, "PassEnv"},
		{"dir missing", fake, agent.Request{Dir: dir + "/missing"}, nil, "missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := agent.Run(context.Background(), tt.spec, tt.req)
			if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			t.Logf("error: %v", err)
			assertContains(t, "error", err.Error(), tt.wantMsg)
		})
	}
}

func TestRunCancelledBeforeStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := agent.Run(ctx, agent.Spec{Kind: agent.KindCommand, Command: "true"}, agent.Request{Dir: t.TempDir()})
	if !errors.Is(err, context.Canceled) || !res.Interrupted {
		t.Fatalf("err, Interrupted = %v, %v", err, res.Interrupted)
	}
}

func TestNewSessionID(t *testing.T) {
	t.Parallel()
	a, b := agent.NewSessionID(), agent.NewSessionID()
	if !uuidRE.MatchString(a) || a == b {
		t.Fatalf("NewSessionID = %q, %q; want distinct UUID v4s", a, b)
	}
}
