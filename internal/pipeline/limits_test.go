package pipeline_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/failure"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/sandbox"
	"github.com/webordinary/webordinary/internal/worker"
)

// A build that forks without end stops at the project's process limit, and the job fails for
// that reason at once: no retry, no repair turn, the owner told it is the operator's to raise.
func TestBuildOverItsLimitFailsForThatReason(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"package.json": `{"name":"s","version":"1.0.0","scripts":{"build":"sh build.sh"}}`,
		"build.sh":     "i=0; while [ $i -lt 400 ]; do sleep 600 & i=$((i+1)); done; mkdir -p dist && cp index.html dist/\n",
		"index.html":   "<h1>Hello</h1>\n",
	}
	f := setupConfig(t, files, func(p *project.Project) { p.JobLimits = "procs=32" }, sandboxed(t))
	out, err := f.run(task("t1", "replace Hello with Hi in index.html"))
	if !errors.Is(err, worker.ErrPermanent) || !errors.Is(err, sandbox.ErrLimit) {
		t.Fatalf("fork bomb in the build under procs=32: %v (%+v)", err, out.Report)
	}
	if msg := err.Error(); !strings.Contains(msg, "procs=32") || strings.Contains(msg, "repair") {
		t.Fatalf("error does not name the limit, or a repair turn ran: %v", err)
	}
	if p := failure.Of(err); p != failure.Limit || !p.Operators() {
		t.Fatalf("owner told problem %q, want %q", p, failure.Limit)
	}
}

// sandboxed runs the pipeline's jobs in a sandbox (mode required) whose job user can reach the
// fixture's directories.
func sandboxed(t *testing.T) func(*pipelineConfig) {
	return func(c *pipelineConfig) {
		// t.TempDir's directories are 0700; the job's user must be able to enter them.
		for _, d := range []string{filepath.Dir(filepath.Dir(c.Workspaces)), filepath.Dir(c.Workspaces)} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		sb, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeRequired, Roots: []string{c.Workspaces, c.State}})
		if err != nil {
			t.Fatal(err)
		}
		c.Sandbox = sb
	}
}
