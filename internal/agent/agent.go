package agent

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/sandbox"
)

// Agent kinds.
const (
	KindClaude   = "claude"
	KindCodex    = "codex"
	KindOpencode = "opencode"
	KindCommand  = "command"
)

// Defaults applied to a zero Spec field.
const (
	DefaultWallClock      = 30 * time.Minute
	DefaultNoOutput       = 10 * time.Minute
	DefaultInterruptGrace = 10 * time.Second
)

// Watchdog names, as reported in Result.TimedOut.
const (
	WatchdogWallClock = "wall-clock"
	WatchdogNoOutput  = "no-output"
)

var (
	// ErrNotInstalled means the agent's binary could not be found. The error wrapping it says
	// how to install or configure the agent.
	ErrNotInstalled = errors.New("not installed")
	// ErrInvalid means the Spec or Request cannot describe a run.
	ErrInvalid = errors.New("invalid agent configuration")
)

// Spec is a project's agent choice and limits.
type Spec struct {
	// Kind is "claude" (default), "codex", "opencode" or "command".
	Kind string
	// Command is, for kind "command", a shell command run with sh -c. For the other kinds it
	// overrides the binary (a name looked up on PATH, or a path); default "claude", "codex" or
	// "opencode" on PATH.
	Command string
	// Model is passed as --model when set.
	Model string
	// MaxTurns is claude's --max-turns (0 = unset). Other kinds ignore it.
	MaxTurns int
	// MaxBudgetUSD is claude's --max-budget-usd (0 = unset). Other kinds ignore it here; the
	// egress proxy holds every kind to it (egress.Policy.MaxCostUSD).
	MaxBudgetUSD float64
	// WallClock bounds the whole run (watchdog). Default 30m.
	WallClock time.Duration
	// NoOutput stops a run that wrote nothing to stdout or stderr for this long (watchdog).
	// Default 10m.
	NoOutput time.Duration
	// InterruptGrace is how long the agent gets after the soft interrupt (SIGINT) before every
	// process it started is killed. Default 10s.
	InterruptGrace time.Duration
	// PassEnv names extra variables of the worker's environment the agent may see (model
	// credentials), besides the built-in allowlist.
	PassEnv []string
	// BaseURL points the agent at a model API endpoint (a gateway or proxy) instead of its
	// vendor's; empty: the vendor's. claude: ANTHROPIC_BASE_URL; codex: a model provider of
	// its own in -c overrides (base_url, Responses API, key in OPENAI_API_KEY; codex ignores
	// OPENAI_BASE_URL); opencode: the baseURL option of the model's
	// provider ("openai/gpt-5" → openai; without a model: openai and anthropic), given inline
	// (OPENCODE_CONFIG_CONTENT); command: WO_MODEL_BASE_URL. No config file is written.
	BaseURL string
}

// Request is one run.
type Request struct {
	// Dir is the working tree the agent edits. Required; it must exist.
	Dir string
	// Prompt is the instruction, written verbatim on the agent's stdin (every kind; command:
	// also in WO_INSTRUCTION).
	Prompt string
	// SystemPrompt holds platform rules appended to the agent's system prompt (claude:
	// --append-system-prompt; codex and opencode: put before the prompt; command:
	// WO_SYSTEM_PROMPT).
	SystemPrompt string
	// Session is the thread's agent session id; "" when the agent must start a new one.
	// claude uses it as --session-id for a new session (Run generates one when empty); codex and
	// opencode choose their own ids for new sessions.
	Session string
	// Resume means Session came from an earlier job of this thread: continue it.
	Resume bool
	// ConfigDir is the per-tenant agent config and state directory (claude: CLAUDE_CONFIG_DIR;
	// codex: CODEX_HOME; opencode: XDG_DATA_HOME). Run creates it when missing. Optional.
	ConfigDir string
	// Env holds extra KEY=VALUE variables for the agent (e.g. WO_PROJECT, WO_JOB).
	Env []string
	// Home, when set, is the agent's HOME (a per-tenant directory; the worker's own HOME is
	// not visible in a sandbox).
	Home string
	// ReadDirs are directories besides Dir the agent is meant to read (pictures to look at);
	// the Jail must bind them. claude: --add-dir each (Claude Code asks before reading outside
	// its working directories, which in print mode is a denial); codex reads anywhere in its
	// sandbox; opencode and command: named in the prompt only.
	ReadDirs []string
	// Jail, when set, runs the agent sandboxed (see package sandbox); its writable paths must
	// include Dir, ConfigDir and Home.
	Jail *sandbox.Jail
	// Output, when set, receives the raw output lines (stdout and stderr) as they arrive, for a
	// live view: one Write per line, newline included. Writes are serialized and happen on the
	// path that reads the agent's output, so a slow writer slows the agent; errors are ignored.
	Output io.Writer
}

// Result is what the run produced, judged from the agent's events, not its exit code.
type Result struct {
	// OK means the agent says it succeeded (claude: is_error == false and no
	// permission_denials). Always false when Interrupted or TimedOut.
	OK bool
	// Interrupted means ctx was cancelled during the run (soft interrupt, then kill).
	Interrupted bool
	// TimedOut is "" or the watchdog that stopped the run: "wall-clock" or "no-output".
	TimedOut string
	// Summary is, for claude, the result event's "result"; else the agent's last message; else
	// the last line of output.
	Summary string
	// Session is the session (thread) id to store for the next job of the thread.
	Session string
	// CostUSD is what the agent reported spending (0 when it does not report cost).
	CostUSD float64
	// Turns is the number of turns the agent reported.
	Turns int
	// Duration is the wall time of the run.
	Duration time.Duration
	// ExitCode is the agent's exit code (128+signal when it was killed by a signal).
	ExitCode int
	// Error says why the run is not OK, for a person; "" when OK.
	Error string
	// Setup, for a run that is not OK, says why it failed for a reason of the machine's setup,
	// not of the instruction: a program not found or not executable (exit status 127 or 126:
	// not installed, or not visible in the sandbox), or a dependency not installed (kind
	// command, or an agent CLI whose launcher failed before its first event: "Missing optional
	// dependency"). Running it again, however the owner words the change, fails the same way.
	Setup string
	// OutputTail is the last ~4 KiB of raw output (stdout and stderr).
	OutputTail string
}

// Run runs the agent for req under a reaper supervisor (the calling binary must call
// reaper.Main first thing in main). It blocks until the agent and every process it started are
// gone.
//
// Cancelling ctx interrupts the run: SIGINT to the agent, then, after spec.InterruptGrace,
// every descendant is killed; the wall-clock and no-output watchdogs do the same. Either way Run
// returns a Result (Interrupted or TimedOut set, OK false) and a nil error.
//
// Run returns an error only when the agent could not be run at all: an invalid spec or
// request (ErrInvalid), a missing binary (ErrNotInstalled, with a message saying how to
// install or configure it), a failure to start, or ctx already done (ctx.Err(), with
// Result.Interrupted set). Safe for concurrent use.
func Run(ctx context.Context, spec Spec, req Request) (Result, error) {
	spec = spec.withDefaults()
	if err := validate(spec, req); err != nil {
		return Result{}, err
	}
	ad := adapterFor(spec.Kind)
	path, err := lookProgram(ad, spec)
	if err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{Interrupted: true, Error: "interrupted before the agent started"}, err
	}
	return runAgent(ctx, spec, req, ad, path)
}

func (s Spec) withDefaults() Spec {
	if s.Kind == "" {
		s.Kind = KindClaude
	}
	if s.WallClock == 0 {
		s.WallClock = DefaultWallClock
	}
	if s.NoOutput == 0 {
		s.NoOutput = DefaultNoOutput
	}
	if s.InterruptGrace == 0 {
		s.InterruptGrace = DefaultInterruptGrace
	}
	return s
}

func validate(spec Spec, req Request) error {
	switch {
	case adapterFor(spec.Kind) == nil:
		return fmt.Errorf("agent: %w: unknown kind %q (want claude, codex, opencode or command)", ErrInvalid, spec.Kind)
	case spec.Kind == KindCommand && strings.TrimSpace(spec.Command) == "":
		return fmt.Errorf("agent: %w: kind command needs a shell command to run", ErrInvalid)
	case spec.WallClock < 0 || spec.NoOutput < 0 || spec.InterruptGrace < 0:
		return fmt.Errorf("agent: %w: negative watchdog or grace duration", ErrInvalid)
	case spec.MaxTurns < 0 || spec.MaxBudgetUSD < 0:
		return fmt.Errorf("agent: %w: negative max turns or budget", ErrInvalid)
	case req.Dir == "":
		return fmt.Errorf("agent: %w: no working directory", ErrInvalid)
	case req.Resume && req.Session == "":
		return fmt.Errorf("agent: %w: resume without a session id", ErrInvalid)
	case spec.BaseURL != "" && !httpURL(spec.BaseURL):
		return fmt.Errorf("agent: %w: base URL %q: want http://host[:port][/path] or https://…", ErrInvalid, spec.BaseURL)
	}
	return validateEnvNames(spec.PassEnv)
}

// httpURL reports whether s is an absolute http or https URL with a host.
func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func validateEnvNames(names []string) error {
	for _, n := range names {
		if n == "" || strings.ContainsAny(n, "=\x00") {
			return fmt.Errorf("agent: %w: bad variable name %q in PassEnv", ErrInvalid, n)
		}
	}
	return nil
}

// NewSessionID returns a random UUID v4 string (claude wants a UUID for --session-id).
func NewSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])  // crypto/rand.Read never fails (it panics instead)
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // variant 10
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
