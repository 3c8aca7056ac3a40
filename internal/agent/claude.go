package agent

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// claude runs Claude Code in print mode with stream-json output.
type claude struct{}

var _ adapter = claude{}

func (claude) program(spec Spec) (string, string) {
	return binaryOr(spec, "claude"), "install Claude Code (npm install -g @anthropic-ai/claude-code) " +
		"or set the agent command to the path of the claude binary"
}

func (claude) credentials() []string { return slices.Concat(anthropicEnv, bedrockEnv) }

// invoke starts a new session (--session-id, generated when req.Session is empty) or resumes
// req.Session (--resume). The prompt goes on stdin.
func (claude) invoke(spec Spec, req Request) (invocation, parser) {
	session := req.Session
	if session == "" {
		session = NewSessionID()
	}
	inv := invocation{args: claudeArgs(spec, req, session), stdin: req.Prompt, env: claudeEnv(spec, req)}
	return inv, &claudeParser{session: session}
}

func claudeArgs(spec Spec, req Request, session string) []string {
	args := []string{"-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "acceptEdits"}
	if spec.Model != "" {
		args = append(args, "--model", spec.Model)
	}
	if spec.MaxTurns > 0 {
		args = append(args, "--max-turns", strconv.Itoa(spec.MaxTurns))
	}
	if spec.MaxBudgetUSD > 0 {
		args = append(args, "--max-budget-usd", strconv.FormatFloat(spec.MaxBudgetUSD, 'f', -1, 64))
	}
	for _, d := range req.ReadDirs {
		args = append(args, "--add-dir", d)
	}
	if req.SystemPrompt != "" {
		// One argument, so that rules starting with "-" are not taken for flags.
		args = append(args, "--append-system-prompt="+req.SystemPrompt)
	}
	if req.Resume {
		return append(args, "--resume", session)
	}
	return append(args, "--session-id", session)
}

func claudeEnv(spec Spec, req Request) []string {
	env := []string{"CLAUDE_CODE_MAX_RETRIES=2"}
	if req.ConfigDir != "" {
		env = append(env, "CLAUDE_CONFIG_DIR="+req.ConfigDir)
	}
	if spec.BaseURL != "" {
		env = append(env, "ANTHROPIC_BASE_URL="+spec.BaseURL)
	}
	return env
}

// claudeEvent is the part of a stream-json line the adapter reads.
type claudeEvent struct {
	Type              string            `json:"type"`
	Subtype           string            `json:"subtype"`
	SessionID         string            `json:"session_id"`
	IsError           bool              `json:"is_error"`
	Result            string            `json:"result"`
	TotalCostUSD      float64           `json:"total_cost_usd"`
	NumTurns          int               `json:"num_turns"`
	PermissionDenials []claudeDenial    `json:"permission_denials"`
	TerminalReason    string            `json:"terminal_reason"`
	Message           json.RawMessage   `json:"message"`
	Errors            []json.RawMessage `json:"errors"`
}

type claudeDenial struct {
	ToolName  string         `json:"tool_name"`
	ToolInput map[string]any `json:"tool_input"`
}

// claudeMessage is an assistant message; user messages (tool results) are not decoded.
type claudeMessage struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

type claudeParser struct {
	session  string // the id claude was started with
	reported string // the id claude reported
	lastText string // the last assistant text
	result   *claudeEvent
}

func (p *claudeParser) line(b []byte) {
	var ev claudeEvent
	if !decode(b, &ev) {
		return
	}
	if ev.SessionID != "" {
		p.reported = ev.SessionID
	}
	switch ev.Type {
	case "assistant":
		p.assistant(ev.Message)
	case "result":
		p.result = &ev
	}
}

func (p *claudeParser) assistant(raw json.RawMessage) {
	var m claudeMessage
	if len(raw) == 0 || !decode(raw, &m) {
		return
	}
	var texts []string
	for _, c := range m.Content {
		if c.Type == "text" && strings.TrimSpace(c.Text) != "" {
			texts = append(texts, strings.TrimSpace(c.Text))
		}
	}
	if len(texts) > 0 {
		p.lastText = strings.Join(texts, "\n")
	}
}

func (p *claudeParser) judge(res *Result) {
	res.Session = firstNonEmpty(p.reported, p.session)
	r := p.result
	if r == nil {
		res.Summary = firstNonEmpty(p.lastText, lastLine(res.OutputTail))
		res.Error = fmt.Sprintf("claude ended without a result (exit status %d)", res.ExitCode)
		return
	}
	res.CostUSD, res.Turns = r.TotalCostUSD, r.NumTurns
	res.Summary = firstNonEmpty(strings.TrimSpace(r.Result), p.lastText, lastLine(res.OutputTail))
	res.OK = !r.IsError && len(r.PermissionDenials) == 0
	res.Error = claudeError(r)
}

func claudeError(r *claudeEvent) string {
	switch {
	case r.IsError:
		msg := "claude reported an error (" + firstNonEmpty(r.TerminalReason, r.Subtype, "no reason given") + ")"
		if detail := firstNonEmpty(strings.TrimSpace(r.Result), joinRaw(r.Errors)); detail != "" {
			msg += ": " + detail
		}
		return msg
	case len(r.PermissionDenials) > 0:
		return "claude was denied permission for " + denied(r.PermissionDenials)
	}
	return ""
}

// denied names the denied tool calls, e.g. `Bash (rm -rf /), Write (a.txt)`.
func denied(ds []claudeDenial) string {
	var names []string
	for _, d := range ds {
		name := firstNonEmpty(d.ToolName, "a tool")
		for _, k := range []string{"command", "file_path", "path", "url"} {
			if v, ok := d.ToolInput[k].(string); ok && v != "" {
				name += " (" + v + ")"
				break
			}
		}
		names = append(names, name)
	}
	return strings.Join(names, ", ")
}

// joinRaw joins JSON strings (or other JSON values, verbatim) with "; ".
func joinRaw(vs []json.RawMessage) string {
	var parts []string
	for _, v := range vs {
		var s string
		if json.Unmarshal(v, &s) != nil {
			s = string(v)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
