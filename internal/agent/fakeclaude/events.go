package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// emitter prints claude's events in the requested output format: every event as a JSON line
// for stream-json, only the result for json and text.
type emitter struct {
	w      io.Writer
	format string
	tools  int
}

func newEmitter(w io.Writer, format string) *emitter { return &emitter{w: w, format: format} }

func (e *emitter) stream(ev any) {
	if e.format != "stream-json" {
		return
	}
	b, _ := json.Marshal(ev)
	fmt.Fprintf(e.w, "%s\n", b)
}

func (e *emitter) init(session, cwd string, o options) {
	e.stream(map[string]any{
		"type": "system", "subtype": "init", "session_id": session, "cwd": cwd,
		"model": o.model, "permissionMode": o.permissionMode, "apiKeySource": "none",
		"tools": []string{"Bash", "Edit", "Read", "Write"},
	})
}

// text emits an assistant message with one text block.
func (e *emitter) text(session, text string) {
	e.assistant(session, []any{map[string]any{"type": "text", "text": text}})
}

// toolUse emits an assistant message with a text block and a tool_use block; it returns the
// tool_use id.
func (e *emitter) toolUse(session, text, tool string, input map[string]any) string {
	e.tools++
	id := fmt.Sprintf("toolu_fake_%03d", e.tools)
	e.assistant(session, []any{
		map[string]any{"type": "text", "text": text},
		map[string]any{"type": "tool_use", "id": id, "name": tool, "input": input},
	})
	return id
}

func (e *emitter) assistant(session string, content []any) {
	e.stream(map[string]any{
		"type": "assistant", "session_id": session, "parent_tool_use_id": nil,
		"message": map[string]any{"role": "assistant", "type": "message", "model": "fakeclaude", "content": content},
	})
}

// toolResult emits the user message carrying a tool's result.
func (e *emitter) toolResult(session, id string, err error) {
	content, isErr := "ok", false
	if err != nil {
		content, isErr = err.Error(), true
	}
	e.stream(map[string]any{
		"type": "user", "session_id": session, "parent_tool_use_id": nil,
		"message": map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": id, "content": content, "is_error": isErr},
		}},
	})
}

// resultEvent is claude's final event.
type resultEvent struct {
	Type              string        `json:"type"`
	Subtype           string        `json:"subtype"`
	IsError           bool          `json:"is_error"`
	DurationMS        int64         `json:"duration_ms"`
	DurationAPIMS     int64         `json:"duration_api_ms"`
	NumTurns          int           `json:"num_turns"`
	Result            string        `json:"result,omitempty"`
	SessionID         string        `json:"session_id"`
	TotalCostUSD      float64       `json:"total_cost_usd"`
	PermissionDenials []denial      `json:"permission_denials"`
	TerminalReason    string        `json:"terminal_reason,omitempty"`
	Duration          time.Duration `json:"-"`
}

type denial struct {
	ToolName  string         `json:"tool_name"`
	ToolUseID string         `json:"tool_use_id"`
	ToolInput map[string]any `json:"tool_input"`
}

// result prints the final event in the output format.
func (e *emitter) result(r resultEvent) {
	r.Type = "result"
	r.DurationMS = r.Duration.Milliseconds()
	if r.PermissionDenials == nil {
		r.PermissionDenials = []denial{}
	}
	switch e.format {
	case "stream-json", "json":
		b, _ := json.Marshal(r)
		fmt.Fprintf(e.w, "%s\n", b)
	default:
		fmt.Fprintln(e.w, r.Result)
	}
}
