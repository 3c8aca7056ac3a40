package pipeline_test

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/agent/modelmock"
	"github.com/webordinary/webordinary/internal/cgroup"
	"github.com/webordinary/webordinary/internal/egress"
	"github.com/webordinary/webordinary/internal/failure"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/sandbox"
	"github.com/webordinary/webordinary/internal/worker"
)

// The platform's real model keys in these tests: the job must never see them, the model API
// must get them and nothing else.
const (
	realAnthropicKey = "sk-ant-platform-real-key"
	realOpenAIKey    = "sk-platform-real-openai-key"
)

// realCLI is the path of an agent CLI installed by .ci/agent-clis; it skips the test, saying
// how to install it, when it is missing.
func realCLI(t *testing.T, name string) string {
	t.Helper()
	dir := cmp.Or(os.Getenv("WO_AGENT_CLIS"), "/var/cache/webordinary/agent-clis")
	path := filepath.Join(dir, "node_modules", ".bin", name)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("SKIPPED: no %s CLI at %s: install the pinned agent CLIs with `bash .ci/agent-clis` (WO_AGENT_CLIS=DIR installs elsewhere)", name, path)
	}
	if err := sandbox.Reachable(path, sandbox.DefaultUID, sandbox.DefaultGID); os.Geteuid() == 0 && err != nil {
		t.Skipf("SKIPPED: the job's user cannot reach the %s CLI: %v (install it elsewhere with WO_AGENT_CLIS=DIR bash .ci/agent-clis)", name, err)
	}
	if out, err := exec.Command("bwrap", "--unshare-user", "--unshare-net", "--ro-bind", "/", "/", "/bin/true").CombinedOutput(); err != nil {
		t.Skipf("SKIPPED: bubblewrap cannot run here (%v: %s)", err, out)
	}
	return path
}

// cliCase is one real agent CLI and the tool calls its model makes to edit a file.
type cliCase struct {
	kind, bin, model string
	// base is the model API's base URL path after the mock's origin, as the CLI's vendor
	// names it.
	base string
	// edit is the script of tool calls that replace old with new in the file at path.
	edit func(path, old, new string) string
	// rlimitsOnly are the project's job limits where no control group can be made (else and
	// when "": the defaults).
	rlimitsOnly string
}

func toolCall(name string, input map[string]string) string {
	b, _ := json.Marshal(input)
	return fmt.Sprintf("[[tool %s %s]]", name, b)
}

var cliCases = []cliCase{
	{kind: "claude", bin: "claude", base: "", edit: func(path, old, new string) string {
		return toolCall("Read", map[string]string{"file_path": path}) +
			toolCall("Edit", map[string]string{"file_path": path, "old_string": old, "new_string": new})
	}},
	{kind: "codex", bin: "codex", model: "gpt-5-codex", base: "/v1", edit: func(path, old, new string) string {
		patch := fmt.Sprintf("*** Begin Patch\n*** Update File: %s\n@@\n-%s\n+%s\n*** End Patch\n", filepath.Base(path), old, new)
		return toolCall("exec_command", map[string]string{"cmd": "apply_patch <<'EOF'\n" + patch + "EOF\n"})
	}},
	{kind: "opencode", bin: "opencode", model: "anthropic/claude-sonnet-4-5", base: "/v1", edit: func(path, old, new string) string {
		return toolCall("read", map[string]string{"filePath": path}) +
			toolCall("edit", map[string]string{"filePath": path, "oldString": old, "newString": new})
	},
		// opencode is a Bun binary: without control groups the default mem=2GiB is RLIMIT_DATA,
		// which counts the JavaScript engine's reservations, and it runs about three times
		// slower and may die with "RangeError: Out of memory". A group's memory.max bounds what
		// it really uses, and the defaults hold.
		rlimitsOnly: "mem=8GiB"},
}

// setupRealCLI is a pipeline whose project runs the real CLI c, sandboxed as by default (the
// platform root, the job uid 65534), behind the egress proxy, whose model routes lead to a
// mock model API holding the platform's keys.
func setupRealCLI(t *testing.T, c cliCase) (*fixture, *modelmock.Server) {
	t.Helper()
	bin := realCLI(t, c.bin)
	t.Setenv("ANTHROPIC_API_KEY", realAnthropicKey)
	t.Setenv("OPENAI_API_KEY", realOpenAIKey)
	mock := modelmock.Start()
	t.Cleanup(mock.Close)
	// opencode on a loaded 2-core machine starts in minutes and prints nothing while it
	// retries: the watchdogs leave it that.
	f := setupConfig(t, site, func(p *project.Project) {
		p.Agent = project.AgentSpec{Kind: c.kind, Command: bin, Model: c.model, WallClock: 12 * time.Minute, NoOutput: 8 * time.Minute}
		if _, err := cgroup.Open(); err != nil {
			p.JobLimits = c.rlimitsOnly
		}
	}, func(cfg *pipelineConfig) {
		proxy, err := egress.New(egress.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { proxy.Close() })
		cfg.Sandbox, cfg.Egress, cfg.AgentBaseURL = jobSandbox(t, cfg), proxy, mock.URL+c.base
		cfg.ModelRetryBackoff, cfg.ModelRetryBudget = 200*time.Millisecond, 300*time.Millisecond
	})
	return f, mock
}

// runLong runs a job with more time than f.run gives: a real CLI starts slower than the fake.
func (f *fixture) runLong(t *testing.T, thread, instruction string) (worker.Outcome, error) {
	t.Helper()
	start := time.Now()
	out, err := f.p.Process(t.Context(), task(thread, instruction))
	t.Logf("job on %s: %s, %v", thread, time.Since(start).Round(10*time.Millisecond), err)
	return out, err
}

// TestRealAgentCLIEditsAndResumes runs each real agent CLI through the pipeline: a first job
// edits a file through the CLI's own tools and is committed and pushed; a second job on the
// thread resumes the session (its model calls carry the first job's conversation), gets a 429
// first and then edits another file. The model API only ever sees the platform's key.
func TestRealAgentCLIEditsAndResumes(t *testing.T) {
	for _, c := range cliCases {
		t.Run(c.kind, func(t *testing.T) {
			f, mock := setupRealCLI(t, c)
			ws := filepath.Join(f.dir, "ws", "site", "alice")
			first := "Say we are open today (first-job-marker). " + c.edit(filepath.Join(ws, "index.html"), "<h1>Hello</h1>", "<h1>Open today</h1>") +
				"[[say I changed the heading to Open today.]]"
			out, err := f.runLong(t, "t1", first)
			if err != nil {
				t.Fatalf("first job: %v\n%s", err, out.OutputTail)
			}
			if got := git(t, f.origin, "show", "thread-t1:index.html"); !strings.Contains(got, "Open today") {
				t.Fatalf("index.html on the thread after the first job: %q\n%s", got, out.OutputTail)
			}
			if len(out.Report.EgressDenied) > 0 {
				t.Errorf("the CLI reached for more than the model: refused %+v", out.Report.EgressDenied)
			}
			session := out.Report.AgentSession
			if session == "" {
				t.Fatalf("no agent session reported")
			}
			second := "Add our founding year. [[fail 429 1 1]]" + c.edit(filepath.Join(ws, "about.html"), "<p>About us</p>", "<p>About us, since 1999</p>")
			out, err = f.runLong(t, "t1", second)
			if err != nil {
				t.Fatalf("second job: %v\n%s", err, out.OutputTail)
			}
			if got := git(t, f.origin, "show", "thread-t1:about.html"); !strings.Contains(got, "since 1999") {
				t.Fatalf("about.html on the thread after the second job: %q\n%s", got, out.OutputTail)
			}
			if got := git(t, f.origin, "show", "thread-t1:index.html"); !strings.Contains(got, "Open today") {
				t.Fatalf("the second job lost the first's edit: %q", got)
			}
			if out.Report.AgentSession != session {
				t.Errorf("second job's session %q, want the first's %q resumed", out.Report.AgentSession, session)
			}
			checkModelCalls(t, mock.Requests(), second)
		})
	}
}

// checkModelCalls: the second job's calls were turned away once (429), then served, and
// carried the first job's conversation; every call carried the platform's real key.
func checkModelCalls(t *testing.T, reqs []modelmock.Request, second string) {
	t.Helper()
	var turnedAway, served, resumed int
	for _, r := range reqs {
		if r.API == "" {
			continue
		}
		if r.Key != realAnthropicKey && r.Key != realOpenAIKey {
			t.Errorf("the model API got key %q on %s, want the platform's", r.Key, r.Path)
		}
		if !strings.Contains(r.Instruction, "founding year") {
			continue
		}
		switch r.Status {
		case 429:
			turnedAway++
		case 200:
			served++
		}
		if strings.Contains(r.Body, "first-job-marker") {
			resumed++
		}
	}
	if turnedAway != 1 || served == 0 {
		t.Errorf("second job's model calls: %d turned away, %d served; want 1 and some", turnedAway, served)
	}
	if resumed == 0 {
		t.Errorf("no model call of the second job carried the first job's conversation: the session was not resumed")
	}
}

// TestRealAgentCLIModelOverloaded: the model API answers 529 (overloaded) to every call; each
// CLI gives up, the platform runs it again within its retry budget, then fails the job for good
// and the owner is told the AI service was unavailable.
func TestRealAgentCLIModelOverloaded(t *testing.T) {
	for _, c := range cliCases {
		t.Run(c.kind, func(t *testing.T) {
			f, mock := setupRealCLI(t, c)
			ws := filepath.Join(f.dir, "ws", "site", "alice")
			out, err := f.runLong(t, "t1", "Say we are open. [[fail 529 100000 0]]"+c.edit(filepath.Join(ws, "index.html"), "Hello", "Open"))
			if !errors.Is(err, worker.ErrPermanent) || failure.Of(err) != failure.Model {
				t.Fatalf("job: %v; want a permanent failure classed %q\n%s", err, failure.Model, out.OutputTail)
			}
			if out.Report.ModelRetries == 0 {
				t.Errorf("the platform did not run the agent again after the overload (report %+v)", out.Report)
			}
			n := 0
			for _, r := range mock.Requests() {
				if r.Status == 529 {
					n++
				}
			}
			t.Logf("%d calls answered 529 over %d agent runs", n, out.Report.ModelRetries+1)
		})
	}
}
