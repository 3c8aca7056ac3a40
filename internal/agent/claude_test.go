package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/agent"
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestClaudeSessionThenResume(t *testing.T) {
	t.Parallel()
	f, spec := setup(t), fakeClaude(t)

	first := run(t, context.Background(), spec, f.request("Please:\nwrite index.html: <h1>Hello</h1>\n"))
	if !first.OK || first.Error != "" {
		t.Fatalf("first run: OK = %v, Error = %q", first.OK, first.Error)
	}
	if !uuidRE.MatchString(first.Session) {
		t.Fatalf("Session = %q, want a generated UUID", first.Session)
	}
	if want := "started session " + first.Session + " (turn 1): wrote index.html"; first.Summary != want {
		t.Errorf("Summary = %q, want %q", first.Summary, want)
	}
	if first.CostUSD != 0.01 || first.Turns != 2 || first.ExitCode != 0 {
		t.Errorf("CostUSD, Turns, ExitCode = %v, %d, %d; want 0.01, 2, 0", first.CostUSD, first.Turns, first.ExitCode)
	}

	req := f.request("replace Hello with Welcome in index.html")
	req.Session, req.Resume = first.Session, true
	second := run(t, context.Background(), spec, req)
	if !second.OK || second.Session != first.Session {
		t.Fatalf("second run: OK = %v, Session = %q; want true, %q", second.OK, second.Session, first.Session)
	}
	assertContains(t, "Summary", second.Summary, "resumed session "+first.Session+" (turn 2)")
	if got := f.read(t, "index.html"); got != "<h1>Welcome</h1>\n" {
		t.Errorf("index.html = %q", got)
	}
}

func TestClaudeGivenSessionID(t *testing.T) {
	t.Parallel()
	f, spec := setup(t), fakeClaude(t)
	req := f.request("say hi")
	req.Session = agent.NewSessionID()
	res := run(t, context.Background(), spec, req)
	if !res.OK || res.Session != req.Session {
		t.Fatalf("OK, Session = %v, %q; want true, %q", res.OK, res.Session, req.Session)
	}
	// The same id again without Resume is a new session with a taken id.
	again := run(t, context.Background(), spec, req)
	if again.OK {
		t.Fatal("reusing a session id for a new session succeeded")
	}
	assertContains(t, "Error", again.Error, "already in use")
}

func TestClaudeResumeUnknownSession(t *testing.T) {
	t.Parallel()
	f, spec := setup(t), fakeClaude(t)
	req := f.request("say hi")
	req.Session, req.Resume = agent.NewSessionID(), true
	res := run(t, context.Background(), spec, req)
	if res.OK {
		t.Fatal("resuming an unknown session succeeded")
	}
	assertContains(t, "Error", res.Error, "No conversation found with session ID: "+req.Session)
}

func TestClaudeMissingResult(t *testing.T) {
	t.Parallel()
	f, spec := setup(t), fakeClaude(t)
	res := run(t, context.Background(), spec, f.request("write a.txt: x\nsay I changed a.txt for you\nno-result"))
	if res.OK || res.ExitCode != 0 {
		t.Fatalf("OK, ExitCode = %v, %d; want false, 0", res.OK, res.ExitCode)
	}
	if res.Summary != "I changed a.txt for you" {
		t.Errorf("Summary = %q, want the last assistant text", res.Summary)
	}
	assertContains(t, "Error", res.Error, "without a result")
	if !uuidRE.MatchString(res.Session) {
		t.Errorf("Session = %q, want the id claude was started with", res.Session)
	}
}

func TestClaudeNotOK(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, prompt string
		maxTurns     int
		wantError    []string
	}{
		{"fail", "write a.txt: x\nfail the build is broken", 0,
			[]string{"claude reported an error (error_during_execution)", "the build is broken"}},
		{"deny", "write a.txt: x\ndeny git push --force", 0,
			[]string{"denied permission for Bash (git push --force)"}},
		{"edit outside the tree", "write ../escape.txt: x", 0,
			[]string{"outside the working directory"}},
		{"max turns", "write a.txt: 1\nwrite b.txt: 2\nwrite c.txt: 3", 2,
			[]string{"error_max_turns"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, spec := setup(t), fakeClaude(t)
			spec.MaxTurns = tt.maxTurns
			res := run(t, context.Background(), spec, f.request(tt.prompt))
			if res.OK {
				t.Fatal("OK = true")
			}
			for _, w := range tt.wantError {
				assertContains(t, "Error", res.Error, w)
			}
		})
	}
}

func TestClaudeFlags(t *testing.T) {
	t.Parallel()
	f, spec := setup(t), fakeClaude(t)
	spec.Model, spec.MaxBudgetUSD = "claude-test-model", 1.5
	req := f.request("say hi")
	req.SystemPrompt = "- Never touch .git"
	res := run(t, context.Background(), spec, req)
	if !res.OK {
		t.Fatalf("Error = %q", res.Error)
	}
	b, err := os.ReadFile(filepath.Join(f.config, "fakeclaude", "sessions", res.Session+".json"))
	if err != nil {
		t.Fatal(err)
	}
	assertContains(t, "session file", string(b), `"system_prompt": "- Never touch .git"`)
	assertContains(t, "session file", string(b), `"model": "claude-test-model"`)
}

func TestClaudeInterrupt(t *testing.T) {
	t.Parallel()
	f, spec := setup(t), fakeClaude(t)
	spec.InterruptGrace = deadline
	req := f.request("write a.txt: x\nsleep 30")
	sig := newLineSignal("Still working")
	req.Output = sig
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cancelWhen(cancel, sig.arrived)

	res := run(t, ctx, spec, req)
	if !res.Interrupted || res.OK || res.TimedOut != "" {
		t.Fatalf("Interrupted, OK, TimedOut = %v, %v, %q; want true, false, \"\"", res.Interrupted, res.OK, res.TimedOut)
	}
	if res.Duration >= spec.InterruptGrace {
		t.Errorf("Duration = %v; the soft interrupt should end it well within the grace period", res.Duration)
	}
	// claude exits 0 on SIGINT, reporting the abort in its result.
	if res.ExitCode != 0 || res.Summary != "Request interrupted by user" {
		t.Errorf("ExitCode, Summary = %d, %q", res.ExitCode, res.Summary)
	}
	assertContains(t, "Error", res.Error, "interrupted")
	assertContains(t, "OutputTail", res.OutputTail, `"terminal_reason":"aborted_tools"`)
}

// TestClaudeSIGTERM: claude exits 143 on SIGTERM without a result, leaving its tool shells.
func TestClaudeSIGTERM(t *testing.T) {
	t.Parallel()
	f, spec := setup(t), fakeClaude(t)
	type outcome struct {
		res agent.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := agent.Run(context.Background(), spec, f.request("spawn-orphan orphan.pid\nwrite-pid self.pid\nsleep 30"))
		done <- outcome{res, err}
	}()
	orphan := f.readPid(t, "orphan.pid")
	if err := syscall.Kill(f.readPid(t, "self.pid"), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var res agent.Result
	select {
	case o := <-done:
		if o.err != nil {
			t.Fatalf("Run: %v", o.err)
		}
		res = o.res
	case <-time.After(deadline):
		t.Fatal("Run did not return after SIGTERM")
	}
	if res.OK || res.Interrupted || res.ExitCode != 143 {
		t.Fatalf("OK, Interrupted, ExitCode = %v, %v, %d; want false, false, 143", res.OK, res.Interrupted, res.ExitCode)
	}
	assertContains(t, "Error", res.Error, "without a result (exit status 143)")
	if res.Summary == "" {
		t.Error("Summary is empty; want the last assistant text")
	}
	assertGone(t, orphan)
}

func TestNoOrphanSurvives(t *testing.T) {
	t.Parallel()
	for _, interrupt := range []bool{false, true} {
		t.Run(map[bool]string{false: "completed", true: "interrupted"}[interrupt], func(t *testing.T) {
			t.Parallel()
			f, spec := setup(t), fakeClaude(t)
			prompt := "spawn-orphan orphan.pid"
			if interrupt {
				prompt += "\nsleep 30"
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if interrupt {
				cancelWhen(cancel, func() bool { _, ok := f.pid("orphan.pid"); return ok })
			}
			res := run(t, ctx, spec, f.request(prompt))
			if res.OK == interrupt || res.Interrupted != interrupt {
				t.Fatalf("OK, Interrupted = %v, %v", res.OK, res.Interrupted)
			}
			assertGone(t, f.readPid(t, "orphan.pid"))
		})
	}
}

func TestWatchdogs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, prompt        string
		wallClock, noOutput time.Duration
		want                string
	}{
		{"wall clock", "sleep 30", 500 * time.Millisecond, 0, agent.WatchdogWallClock},
		{"no output", "write a.txt: x\nsilent 30", 0, 500 * time.Millisecond, agent.WatchdogNoOutput},
		{"heartbeat keeps the no-output watchdog quiet", "sleep 1.5", 0, 700 * time.Millisecond, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, spec := setup(t), fakeClaude(t)
			spec.WallClock, spec.NoOutput = tt.wallClock, tt.noOutput
			res := run(t, context.Background(), spec, f.request(tt.prompt))
			if res.TimedOut != tt.want || res.OK != (tt.want == "") || res.Interrupted {
				t.Fatalf("TimedOut, OK, Interrupted = %q, %v, %v; want %q, %v, false",
					res.TimedOut, res.OK, res.Interrupted, tt.want, tt.want == "")
			}
			if tt.want != "" {
				assertContains(t, "Error", res.Error, tt.want+" watchdog")
			}
		})
	}
}

func TestClaudeEnvAllowlist(t *testing.T) {
	t.Parallel()
	f, spec := setup(t), fakeClaude(t)
	spec.PassEnv = []string{"WO_TEST_PASSED"}
	req := f.request("print-env env.txt")
	req.Env = []string{"WO_PROJECT=example.com", "WO_JOB=j1"}
	res := run(t, context.Background(), spec, req)
	if !res.OK {
		t.Fatalf("Error = %q", res.Error)
	}
	env := envMap(f.read(t, "env.txt"))
	want := map[string]string{
		"ANTHROPIC_API_KEY": "test-anthropic-key", "WO_TEST_PASSED": "passed-by-spec",
		"WO_PROJECT": "example.com", "WO_JOB": "j1",
		"CLAUDE_CONFIG_DIR": f.config, "CLAUDE_CODE_MAX_RETRIES": "2", "PATH": os.Getenv("PATH"),
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	allowed := "PATH HOME USER LANG LC_ALL TZ TMPDIR TERM ANTHROPIC_API_KEY ANTHROPIC_BASE_URL " +
		"CLAUDE_CODE_USE_BEDROCK ANTHROPIC_MODEL WO_TEST_PASSED WO_PROJECT WO_JOB CLAUDE_CONFIG_DIR CLAUDE_CODE_MAX_RETRIES"
	for k := range env {
		if !strings.Contains(" "+allowed+" ", " "+k+" ") {
			t.Errorf("the agent saw %s, which is not on the allowlist", k)
		}
	}
}

// envMap parses `env` output, one VAR=value a line.
func envMap(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}
