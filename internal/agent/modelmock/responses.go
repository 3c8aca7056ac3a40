package modelmock

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// responsesRequest is the part of a Responses API request the mock reads.
type responsesRequest struct {
	Input  json.RawMessage   `json:"input"`
	Tools  []json.RawMessage `json:"tools"`
	Stream bool              `json:"stream"`
	Model  string            `json:"model"`
}

// item is an input item: a message or a tool call or its output.
type item struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// text is a message item's text.
func (it item) text() string {
	var s string
	if json.Unmarshal(it.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(it.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// responsesTurn finds the newest user text holding a directive and counts the tool outputs
// after it.
func responsesTurn(req responsesRequest) (instruction string, done int) {
	var s string
	if json.Unmarshal(req.Input, &s) == nil {
		return s, 0
	}
	var items []item
	_ = json.Unmarshal(req.Input, &items)
	for i := len(items) - 1; i >= 0; i-- {
		it := items[i]
		switch {
		case (it.Type == "message" || it.Type == "") && it.Role == "user" && strings.Contains(it.text(), "[["):
			return it.text(), done
		case strings.HasSuffix(it.Type, "_call_output"):
			done++
		}
	}
	return "", 0
}

func openaiError(status int) any {
	return map[string]any{"error": map[string]any{"message": "modelmock: scripted failure (status " + strconv.Itoa(status) + ")",
		"type": "rate_limit_exceeded", "code": "rate_limit_exceeded"}}
}

func (s *Server) responses(w http.ResponseWriter, body []byte, rec *Request) int {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": err.Error()}})
	}
	instruction, done := responsesTurn(req)
	rec.Instruction = instruction
	sc := parse(instruction)
	if status, ok := s.turnAway(w, sc, openaiError); ok {
		return status
	}
	st := sc.next(done)
	if len(req.Tools) == 0 {
		st = step{text: "OK"}
	}
	id := "resp_" + newID()
	out := outputItem(st)
	usage := map[string]any{"input_tokens": 100, "output_tokens": 20, "total_tokens": 120,
		"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}}
	resp := map[string]any{"id": id, "object": "response", "status": "completed", "model": req.Model,
		"output": []any{out}, "usage": usage}
	if !req.Stream {
		return writeJSON(w, http.StatusOK, resp)
	}
	e := newSSE(w)
	e.event("response.created", map[string]any{"response": map[string]any{"id": id, "object": "response", "status": "in_progress"}})
	e.event("response.output_item.added", map[string]any{"output_index": 0, "item": out})
	if st.tool == "" {
		e.event("response.output_text.delta", map[string]any{"output_index": 0, "content_index": 0, "item_id": out["id"], "delta": st.text})
	}
	e.event("response.output_item.done", map[string]any{"output_index": 0, "item": out})
	e.event("response.completed", map[string]any{"response": resp})
	return http.StatusOK
}

// outputItem is st as a Responses API output item.
func outputItem(st step) map[string]any {
	switch {
	case st.tool == "":
		return map[string]any{"type": "message", "id": "msg_" + newID(), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": st.text, "annotations": []any{}}}}
	case st.custom:
		return map[string]any{"type": "custom_tool_call", "id": "ctc_" + newID(), "call_id": "call_" + newID(),
			"name": st.tool, "input": st.input, "status": "completed"}
	}
	return map[string]any{"type": "function_call", "id": "fc_" + newID(), "call_id": "call_" + newID(),
		"name": st.tool, "arguments": st.input, "status": "completed"}
}

// newID is a random hex id.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
