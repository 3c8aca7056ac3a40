package pipeline_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/capability"
	"github.com/webordinary/webordinary/internal/mail/outbox"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/sandbox"
	"github.com/webordinary/webordinary/internal/worker"
)

// setupSandboxed is setup with the agent command and a real sandbox (mode required).
func setupSandboxed(t *testing.T, command string) *fixture {
	t.Helper()
	capability.Need(t, capability.Bubblewrap)
	return setupConfig(t, site, func(p *project.Project) { p.Agent = project.AgentSpec{Kind: "command", Command: command} },
		func(c *pipelineConfig) {
			dir := filepath.Dir(c.Workspaces)
			for _, d := range []string{filepath.Dir(dir), dir} {
				if err := os.Chmod(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			sb, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeRequired, Roots: []string{c.Workspaces, c.State}})
			if err != nil {
				t.Fatal(err)
			}
			c.Sandbox = sb
		})
}

// TestSetupFailuresArePermanent: an agent that fails for a reason of the machine's setup — its
// script is where the sandbox cannot see it, a program is missing, a dependency is not
// installed — fails the same way whatever the owner writes. The job fails at once (not
// retried), the owner reads it is the operator's problem, and the error tells the operator the
// fix.
func TestSetupFailuresArePermanent(t *testing.T) {
	t.Parallel()
	hidden := t.TempDir() // under /tmp: every job has a private /tmp
	if err := os.Chmod(hidden, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(hidden, "edit.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nsed -i \"s|Hello|$WO_INSTRUCTION|\" index.html\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, command string
		want          []string // in the error, for the operator
	}{
		{"script the sandbox cannot see", script, []string{"exit status 127", "add " + hidden + " to sandbox.read_only"}},
		{"missing program", "wo-no-such-program --edit", []string{"exit status 127", "wo-no-such-program"}},
		{"missing optional dependency", `echo "ImportError: Missing optional dependency 'openpyxl'. Use pip or conda to install openpyxl." >&2; exit 1`,
			[]string{"Missing optional dependency 'openpyxl'"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setupSandboxed(t, tc.command)
			_, err := f.run(task("t1", "Hi"))
			if !errors.Is(err, worker.ErrPermanent) {
				t.Fatalf("err = %v; want a permanent failure (retrying cannot fix it)", err)
			}
			t.Logf("the operator reads: %v", err)
			if p := outbox.ProblemOf(err.Error()); p != outbox.ProblemSetup || !p.Operators() {
				t.Errorf("error %q is classed %q; want %q, the operator's", err, p, outbox.ProblemSetup)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestOrdinaryAgentFailureIsRetried: an agent that just fails is retried as before.
func TestOrdinaryAgentFailureIsRetried(t *testing.T) {
	t.Parallel()
	f := setupSandboxed(t, "echo 'could not decide what to change' >&2; exit 1")
	_, err := f.run(task("t1", "Hi"))
	if err == nil || errors.Is(err, worker.ErrPermanent) || outbox.ProblemOf(err.Error()) == outbox.ProblemSetup {
		t.Fatalf("err = %v; want a retryable agent failure", err)
	}
}
