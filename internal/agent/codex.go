package agent

import (
	"fmt"
	"strconv"
	"strings"
)

// codex runs the OpenAI Codex CLI non-interactively (codex exec --json).
type codex struct{}

var _ adapter = codex{}

func (codex) program(spec Spec) (string, string) {
	return binaryOr(spec, "codex"), "install the Codex CLI (npm install -g @openai/codex) " +
		"or set the agent command to the path of the codex binary"
}

func (codex) credentials() []string { return openaiEnv }

// invoke starts a new thread or resumes req.Session (codex exec resume <id>). The system
// prompt and the prompt go on stdin ("-"). Codex chooses new thread ids itself; it reports
// them in thread.started.
func (codex) invoke(spec Spec, req Request) (invocation, parser) {
	var env []string
	if req.ConfigDir != "" {
		env = append(env, "CODEX_HOME="+req.ConfigDir)
	}
	inv := invocation{args: codexArgs(spec, req), stdin: withSystemPrompt(req), env: env}
	return inv, &codexParser{session: req.Session}
}

// codexArgs puts exec's own options before the resume subcommand, where every codex version
// accepts them. In the platform's sandbox (req.Jail) codex runs without one of its own: its
// bubblewrap cannot start inside ours ("bwrap: execvp codex-linux-sandbox"), and ours is the
// job's. Unsandboxed, codex's own keeps it to the working tree. codex exec never asks for
// approval.
func codexArgs(spec Spec, req Request) []string {
	sandbox := "workspace-write"
	if req.Jail.Active() {
		sandbox = "danger-full-access"
	}
	args := []string{"exec", "--json", "--skip-git-repo-check", "--sandbox", sandbox}
	args = append(args, codexQuiet...)
	args = append(args, codexProvider(spec.BaseURL)...)
	if spec.Model != "" {
		args = append(args, "--model", spec.Model)
	}
	if req.Resume {
		args = append(args, "resume", req.Session)
	}
	return append(args, "-")
}

// codexQuiet turns off what codex reaches for at every start besides the model: the update
// check (GitHub), analytics (chatgpt.com) and the curated plugins' sync (GitHub, then
// chatgpt.com). A sandboxed job's network reaches neither, and
// each refusal is a line in the job's report.
var codexQuiet = []string{"-c", "check_for_update_on_startup=false", "-c", "analytics.enabled=false",
	"-c", "features.plugins=false"}

// codexRetries bounds codex's own retries of a model request and of a dropped stream, as
// CLAUDE_CODE_MAX_RETRIES does claude's: a model service that stays busy ends the run, and
// the platform decides whether to run it again (agent.Result.ModelBusy).
const codexRetries = 2

// codexProvider points codex at base with config overrides (-c, which win over the tenant's
// config.toml): a model provider of its own speaking the Responses API over HTTP, with the key
// in OPENAI_API_KEY. Codex ignores OPENAI_BASE_URL, and its built-in provider retries an
// unreachable endpoint without end. None when base is empty: codex's own configuration.
func codexProvider(base string) []string {
	if base == "" {
		return nil
	}
	const p = "model_providers.webordinary."
	kv := []string{"model_provider=" + tomlString("webordinary"),
		p + "name=" + tomlString("webordinary"), p + "base_url=" + tomlString(base),
		p + "env_key=" + tomlString("OPENAI_API_KEY"), p + "wire_api=" + tomlString("responses"),
		p + "supports_websockets=false",
		p + "request_max_retries=" + strconv.Itoa(codexRetries), p + "stream_max_retries=" + strconv.Itoa(codexRetries)}
	var args []string
	for _, o := range kv {
		args = append(args, "-c", o)
	}
	return args
}

// tomlString is s as a TOML basic string.
func tomlString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// codexEvent is the part of a codex exec --json line the adapter reads.
type codexEvent struct {
	Type     string `json:"type"`
	ThreadID string `json:"thread_id"`
	Message  string `json:"message"` // type "error"
	Item     struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Message string `json:"message"`
	} `json:"item"`
	Error struct {
		Message string `json:"message"`
	} `json:"error"` // type "turn.failed"
}

type codexParser struct {
	session   string // the id codex was resumed with
	thread    string // the id codex reported
	lastText  string
	turns     int
	failed    string // turn.failed message
	lastError string // error event message
}

func (p *codexParser) line(b []byte) {
	var ev codexEvent
	if !decode(b, &ev) {
		return
	}
	switch ev.Type {
	case "thread.started":
		p.thread = ev.ThreadID
	case "item.completed":
		if ev.Item.Type == "agent_message" && strings.TrimSpace(ev.Item.Text) != "" {
			p.lastText = strings.TrimSpace(ev.Item.Text)
		}
	case "turn.completed":
		p.turns++
	case "turn.failed":
		p.failed = firstNonEmpty(ev.Error.Message, "turn failed")
	case "error":
		p.lastError = ev.Message
	}
}

// judge: OK means a completed turn, no failed turn and exit status 0.
func (p *codexParser) judge(res *Result) {
	res.Session = firstNonEmpty(p.thread, p.session)
	res.Turns = p.turns
	res.Summary = firstNonEmpty(p.lastText, lastLine(res.OutputTail))
	switch {
	case p.failed != "":
		res.Error = "codex turn failed: " + p.failed
	case p.turns == 0 && p.lastError != "":
		res.Error = "codex reported an error: " + p.lastError
	case p.turns == 0:
		res.Error = fmt.Sprintf("codex ended without completing a turn (exit status %d)", res.ExitCode)
	case res.ExitCode != 0:
		res.Error = fmt.Sprintf("codex exited with status %d", res.ExitCode)
	default:
		res.OK = true
	}
}
