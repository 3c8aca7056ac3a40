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

// A build whose children each stay under an rlimit of the memory limit but together pass it
// (the case rlimits miss) is stopped, and the job fails for that reason, the owner told in
// plain words.
func TestBuildChildrenTogetherOverTheMemoryLimit(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"package.json": `{"name":"s","version":"1.0.0","scripts":{"build":"sh build.sh"}}`,
		"build.sh": `for i in 1 2 3 4; do
  python3 -c 'import sys, time; b = b"x" * (100 << 20); open(sys.argv[1], "w").close(); time.sleep(600)' /tmp/r$i &
done
until [ -e /tmp/r1 ] && [ -e /tmp/r2 ] && [ -e /tmp/r3 ] && [ -e /tmp/r4 ]; do sleep 0.05; done
mkdir -p dist && cp index.html dist/
`,
		"index.html": "<h1>Hello</h1>\n",
	}
	inSandbox := sandboxed(t)
	f := setupConfig(t, files, func(p *project.Project) { p.JobLimits = "mem=256MiB" }, func(c *pipelineConfig) {
		inSandbox(c)
		if st := c.Sandbox.Status(); st.NoCgroup != "" {
			t.Skipf("SKIPPED: no control groups here (%s); rlimits alone let this build pass", st.NoCgroup)
		}
	})
	out, err := f.run(task("t1", "replace Hello with Hi in index.html"))
	if !errors.Is(err, worker.ErrPermanent) || !errors.Is(err, sandbox.ErrLimit) || !strings.Contains(err.Error(), "mem=256MiB") {
		t.Fatalf("a build of four 100 MiB children under mem=256MiB: %v (%+v)", err, out.Report)
	}
	if p := failure.Of(err); p != failure.Limit || !p.Operators() {
		t.Fatalf("owner told problem %q, want %q", p, failure.Limit)
	}
	t.Logf("operator: %v", err)
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
