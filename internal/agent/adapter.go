package agent

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// adapter is what differs between agent kinds: how to call the agent and how to read what it
// prints. Everything else (process, watchdogs, tail, live output) is the runner's.
type adapter interface {
	// program is the executable to run for spec, and a sentence telling a person how to
	// install or configure it.
	program(spec Spec) (name, install string)
	// credentials are the worker's variables this kind may see besides the base allowlist.
	credentials() []string
	// invoke describes the run of req and returns a fresh parser for its output. req.Session
	// is already set when the adapter chooses session ids up front.
	invoke(spec Spec, req Request) (invocation, parser)
}

// invocation is one agent process, minus the binary.
type invocation struct {
	args  []string
	stdin string   // written to stdin, which is then closed
	env   []string // KEY=VALUE set by the adapter; wins over every other source
}

// parser reads one run's output and judges it. Calls are serialized by the runner.
type parser interface {
	// line is one line of stdout, without its newline.
	line(b []byte)
	// judge fills res (OK, Summary, Session, CostUSD, Turns, Error) once the process is gone.
	// res.ExitCode and res.OutputTail are already set.
	judge(res *Result)
}

func adapterFor(kind string) adapter {
	switch kind {
	case KindClaude:
		return claude{}
	case KindCodex:
		return codex{}
	case KindOpencode:
		return opencode{}
	case KindCommand:
		return command{}
	}
	return nil
}

// lookProgram resolves the adapter's executable, failing with what to do when it is missing.
func lookProgram(ad adapter, spec Spec) (string, error) {
	name, install := ad.program(spec)
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("agent: %s %w: cannot run %q (%v); %s", spec.Kind, ErrNotInstalled, name, cause(err), install)
	}
	// Absolute, because the agent runs in the request's directory, not the worker's.
	return filepath.Abs(path)
}

// cause is the innermost error text of a LookPath failure, without the repeated file name.
func cause(err error) string {
	var e *exec.Error
	if errors.As(err, &e) {
		return e.Err.Error()
	}
	return err.Error()
}

// binaryOr is spec.Command when set, else the default binary name.
func binaryOr(spec Spec, def string) string {
	if c := strings.TrimSpace(spec.Command); c != "" {
		return c
	}
	return def
}

// withSystemPrompt puts the platform rules before the prompt, for agents that have no flag
// for them.
func withSystemPrompt(req Request) string {
	if strings.TrimSpace(req.SystemPrompt) == "" {
		return req.Prompt
	}
	return req.SystemPrompt + "\n\n" + req.Prompt
}
