package agent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/agent"
	"github.com/webordinary/webordinary/internal/agent/agenttest"
	"github.com/webordinary/webordinary/internal/reaper"
)

// deadline bounds every wait in these tests.
const deadline = 20 * time.Second

// Variables of the test process's environment that the env tests check; set here because
// t.Setenv cannot be used in parallel tests.
var testEnv = map[string]string{
	"WO_GIT_TOKEN":          "secret-push-token",
	"AWS_SECRET_ACCESS_KEY": "secret-aws-key",
	"ANTHROPIC_API_KEY":     "test-anthropic-key",
	"OPENAI_API_KEY":        "test-openai-key",
	"WO_TEST_PASSED":        "passed-by-spec",
	"WO_TEST_NOT_PASSED":    "must-not-leak",
}

func TestMain(m *testing.M) {
	reaper.Main()
	// Under -race a binary exiting with code 0 sleeps 1 s by default; supervisors (this test
	// binary re-executed) inherit this environment.
	if _, ok := os.LookupEnv("GORACE"); !ok {
		_ = os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	for k, v := range testEnv {
		_ = os.Setenv(k, v)
	}
	_ = os.Unsetenv("CLAUDE_CODE_USE_BEDROCK")
	os.Exit(m.Run())
}

// fixture is one test's working tree and agent config dir.
type fixture struct {
	dir, config string
}

func setup(t *testing.T) fixture {
	t.Helper()
	root := t.TempDir()
	f := fixture{dir: filepath.Join(root, "site"), config: filepath.Join(root, "config")}
	if err := os.Mkdir(f.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

// request is a request for prompt in the fixture.
func (f fixture) request(prompt string) agent.Request {
	return agent.Request{Dir: f.dir, Prompt: prompt, ConfigDir: f.config}
}

func (f fixture) read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fakeClaude is a claude Spec running fakeclaude.
func fakeClaude(t *testing.T) agent.Spec {
	t.Helper()
	return agent.Spec{Kind: agent.KindClaude, Command: agenttest.BuildFakeClaude(t)}
}

// run runs the agent and fails the test if it could not be run.
func run(t *testing.T, ctx context.Context, spec agent.Spec, req agent.Request) agent.Result {
	t.Helper()
	res, err := agent.Run(ctx, spec, req)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	t.Logf("result: %+v", res)
	return res
}

// waitFor polls cond until it holds, failing the test at the deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readPid waits for a pid file in the fixture and returns the pid.
func (f fixture) readPid(t *testing.T, name string) int {
	t.Helper()
	var pid int
	waitFor(t, name, func() bool {
		var ok bool
		pid, ok = f.pid(name)
		return ok
	})
	return pid
}

// pid reads a complete pid file in the fixture.
func (f fixture) pid(name string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(f.dir, name))
	if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil
}

// cancelWhen calls cancel once cond holds, or at the deadline, polling from a goroutine
// (which must not fail the test itself).
func cancelWhen(cancel context.CancelFunc, cond func() bool) {
	go func() {
		defer cancel()
		for end := time.Now().Add(deadline); !cond() && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
	}()
}

// assertGone waits for pid to disappear.
func assertGone(t *testing.T, pid int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("pid %d to be gone", pid), func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	})
}

// lineSignal is a live-output writer that closes seen when a line containing needle arrives.
type lineSignal struct {
	needle []byte
	seen   chan struct{}
	once   sync.Once
}

func newLineSignal(needle string) *lineSignal {
	return &lineSignal{needle: []byte(needle), seen: make(chan struct{})}
}

func (s *lineSignal) Write(p []byte) (int, error) {
	if bytes.Contains(p, s.needle) {
		s.once.Do(func() { close(s.seen) })
	}
	return len(p), nil
}

// arrived reports whether the line has arrived.
func (s *lineSignal) arrived() bool {
	select {
	case <-s.seen:
		return true
	default:
		return false
	}
}

// assertContains fails the test unless s contains want.
func assertContains(t *testing.T, what, s, want string) {
	t.Helper()
	if !strings.Contains(s, want) {
		t.Errorf("%s = %q, want it to contain %q", what, s, want)
	}
}
