package demo

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/agent"
)

func TestRunAgent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		instruction string
		code        int
		lines       []string // prefixes of the output lines, in order
		summary     string   // substring of the last line
	}{
		{
			name:        "two edits",
			instruction: SampleInstruction,
			code:        0,
			lines: []string{
				"edit 1: made the header (h1) green in style.css",
				`edit 2: added a paragraph to index.html: "Fresh bread every morning."`,
				"changed: index.html, style.css",
				SummaryPrefix + "made the header (h1) green in style.css; added a paragraph",
			},
		},
		{
			name:        "nothing to change",
			instruction: "replace Home with Home",
			code:        0,
			lines:       []string{"edit 1: replaced", SummaryPrefix + `replaced "Home" with "Home"`},
			summary:     "No file needed changing.",
		},
		{
			name:        "not understood",
			instruction: "Please make the site look more modern.",
			code:        1,
			lines:       append(strings.Split(Help, "\n"), SummaryPrefix+`did not understand "Please make the site look more modern."`),
			summary:     "the demo agent only does literal edits: " + Can + ". Nothing was changed.",
		},
		{
			name:        "traversal",
			instruction: "replace a with b in ../x",
			code:        1,
			lines:       []string{SummaryPrefix + `"replace a with b in ../x": refusing ../x`},
			summary:     "Nothing was changed.",
		},
		{
			name:        "too long",
			instruction: "make the header red. " + strings.Repeat("x", maxInstruction),
			code:        1,
			lines:       []string{SummaryPrefix + "the instruction is longer than"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			code := RunAgent(strings.NewReader(tt.instruction), &out, setup(t))
			if code != tt.code {
				t.Errorf("exit code = %d, want %d", code, tt.code)
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(lines) != len(tt.lines) {
				t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(tt.lines), out.String())
			}
			for i, want := range tt.lines {
				if !strings.HasPrefix(lines[i], want) {
					t.Errorf("line %d = %q, want prefix %q", i+1, lines[i], want)
				}
			}
			if last := lines[len(lines)-1]; !strings.Contains(last, tt.summary) {
				t.Errorf("last line %q does not contain %q", last, tt.summary)
			}
		})
	}
}

// TestRunAgentThroughAgentPackage runs the demo agent as the platform will: agent kind
// "command", `<binary> demo-agent`, the instruction on stdin.
func TestRunAgentThroughAgentPackage(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	spec := agent.Spec{Kind: agent.KindCommand, Command: shellQuote(exe) + " demo-agent",
		WallClock: time.Minute, PassEnv: []string{"GORACE"}}
	tests := []struct {
		name, instruction string
		ok                bool
		summary           string
	}{
		{"done", SampleInstruction, true, SummaryPrefix + "made the header (h1) green in style.css; added a paragraph"},
		{"not understood", "make it pop", false, SummaryPrefix + `did not understand "make it pop"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := setup(t)
			req := agent.Request{Dir: dir, Prompt: tt.instruction, ConfigDir: t.TempDir()}
			if testing.CoverMode() != "" { // else the agent warns on exit that GOCOVERDIR is not set
				req.Env = []string{"GOCOVERDIR=" + t.TempDir()}
			}
			res, err := agent.Run(context.Background(), spec, req)
			if err != nil {
				t.Fatal(err)
			}
			if res.OK != tt.ok || !strings.HasPrefix(res.Summary, tt.summary) {
				t.Errorf("OK = %v, summary %q; want %v, %q\noutput:\n%s", res.OK, res.Summary, tt.ok, tt.summary, res.OutputTail)
			}
			if tt.ok && !strings.Contains(read(t, dir, "style.css"), "color: green;") {
				t.Errorf("style.css not edited")
			}
		})
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
