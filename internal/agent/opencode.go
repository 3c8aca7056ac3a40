package agent

import (
	"encoding/json"
	"fmt"
	"strings"
)

// opencode runs opencode non-interactively (opencode run --format json).
type opencode struct{}

var _ adapter = opencode{}

// opencodeEnv are the model credentials opencode may use; other providers' keys go in
// Spec.PassEnv.
var opencodeEnv = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY"}

// opencodeQuiet turns off what opencode fetches for itself at every start besides the model
// calls: its model catalogue (it has one built in), updates, sharing and language servers.
// A sandboxed job's network reaches none of them, and each refusal is a wait and a line in the
// job's report.
var opencodeQuiet = []string{"OPENCODE_DISABLE_MODELS_FETCH=true", "OPENCODE_DISABLE_AUTOUPDATE=true",
	"OPENCODE_DISABLE_SHARE=true", "OPENCODE_DISABLE_LSP_DOWNLOAD=true"}

func (opencode) program(spec Spec) (string, string) {
	return binaryOr(spec, "opencode"), "install opencode (npm install -g opencode-ai) " +
		"or set the agent command to the path of the opencode binary"
}

func (opencode) credentials() []string { return opencodeEnv }

// invoke writes the system prompt and the prompt verbatim on stdin (opencode run reads its
// message from stdin when it is not a terminal), so no part of an owner's text is ever taken
// for a flag or mangled as an argument, and passes --session to continue a session. opencode
// chooses new session ids itself and reports them on every event.
func (opencode) invoke(spec Spec, req Request) (invocation, parser) {
	var env []string
	if req.ConfigDir != "" {
		env = append(env, "XDG_DATA_HOME="+req.ConfigDir) // sessions live in $XDG_DATA_HOME/opencode
	}
	env = append(env, opencodeQuiet...)
	if spec.BaseURL != "" {
		env = append(env, "OPENCODE_CONFIG_CONTENT="+opencodeBaseURLConfig(spec))
	}
	inv := invocation{args: opencodeArgs(spec, req), stdin: withSystemPrompt(req), env: env}
	return inv, &opencodeParser{session: req.Session}
}

// opencodeBaseURLConfig is inline opencode config (merged over the others) that sets the
// baseURL option of the model's provider, or of openai and anthropic when no model is named.
func opencodeBaseURLConfig(spec Spec) string {
	providers := []string{"anthropic", "openai"}
	if p, _, ok := strings.Cut(spec.Model, "/"); ok && p != "" {
		providers = []string{p}
	}
	type options struct {
		BaseURL string `json:"baseURL"`
	}
	type provider struct {
		Options options `json:"options"`
	}
	cfg := struct {
		Provider map[string]provider `json:"provider"`
	}{Provider: map[string]provider{}}
	for _, p := range providers {
		cfg.Provider[p] = provider{Options: options{BaseURL: spec.BaseURL}}
	}
	b, _ := json.Marshal(cfg)
	return string(b)
}

func opencodeArgs(spec Spec, req Request) []string {
	args := []string{"run", "--format", "json"}
	if spec.Model != "" {
		args = append(args, "--model", spec.Model)
	}
	if req.Resume {
		args = append(args, "--session", req.Session)
	}
	return args
}

// opencodeEvent is the part of an opencode run --format json line the adapter reads.
type opencodeEvent struct {
	Type      string `json:"type"`
	SessionID string `json:"sessionID"`
	Part      struct {
		SessionID string  `json:"sessionID"`
		Text      string  `json:"text"`
		Cost      float64 `json:"cost"`
		Tool      string  `json:"tool"`
		State     struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		} `json:"state"`
	} `json:"part"`
	Error    json.RawMessage `json:"error"`
	Rejected []string        `json:"rejected"`
}

type opencodeParser struct {
	session  string // the id opencode was started with
	reported string // the id opencode reported
	lastText string
	cost     float64
	steps    int
	errors   []string
	rejected []string
}

func (p *opencodeParser) line(b []byte) {
	var ev opencodeEvent
	if !decode(b, &ev) {
		return
	}
	if id := firstNonEmpty(ev.SessionID, ev.Part.SessionID); id != "" {
		p.reported = id
	}
	switch ev.Type {
	case "text":
		if t := strings.TrimSpace(ev.Part.Text); t != "" {
			p.lastText = t
		}
	case "step_finish":
		p.steps++
		p.cost += ev.Part.Cost
	case "tool_use":
		if ev.Part.State.Status == "error" && permissionRefused(ev.Part.State.Error) {
			p.rejected = append(p.rejected, firstNonEmpty(ev.Part.Tool, "a tool"))
		}
	case "error":
		p.errors = append(p.errors, opencodeError(ev.Error))
	case "done":
		p.rejected = append(p.rejected, ev.Rejected...)
	}
}

// permissionRefused reports a tool error that says the permission to run it was refused
// (opencode run refuses what its permission config says to ask about: nobody can answer).
func permissionRefused(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "rejected permission") || strings.Contains(m, "permission denied by") ||
		(strings.Contains(m, "permission") && (strings.Contains(m, "rejected") || strings.Contains(m, "denied")))
}

// opencodeError is an error event's message: error.data.message, else error.name.
func opencodeError(raw json.RawMessage) string {
	var e struct {
		Name string `json:"name"`
		Data struct {
			Message string `json:"message"`
		} `json:"data"`
	}
	if len(raw) == 0 || !decode(raw, &e) {
		return firstNonEmpty(string(raw), "unknown error")
	}
	return firstNonEmpty(e.Data.Message, e.Name, "unknown error")
}

// judge: OK means at least one finished step, no error event, no refused permission (a tool
// call refused, or a done event's rejected list) and exit status 0. A refused permission is a
// failure even when opencode ends normally: the agent did not do what it was asked.
func (p *opencodeParser) judge(res *Result) {
	res.Session = firstNonEmpty(p.reported, p.session)
	res.CostUSD, res.Turns = p.cost, p.steps
	res.Summary = firstNonEmpty(p.lastText, lastLine(res.OutputTail))
	switch {
	case len(p.errors) > 0:
		res.Error = "opencode reported an error: " + strings.Join(p.errors, "; ")
	case len(p.rejected) > 0:
		res.Error = "opencode was denied permission for " + strings.Join(p.rejected, ", ")
	case p.steps == 0:
		res.Error = fmt.Sprintf("opencode ended without finishing a step (exit status %d)", res.ExitCode)
	case res.ExitCode != 0:
		res.Error = fmt.Sprintf("opencode exited with status %d", res.ExitCode)
	default:
		res.OK = true
	}
}
