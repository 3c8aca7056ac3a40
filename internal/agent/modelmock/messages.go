package modelmock

import (
	"encoding/json"
	"net/http"
	"strings"
)

// messagesRequest is the part of a Messages API request the mock reads.
type messagesRequest struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools  []json.RawMessage `json:"tools"`
	Stream bool              `json:"stream"`
	Model  string            `json:"model"`
}

// block is a content block of a message.
type block struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// blocks are a message's content blocks (a string content is one text block).
func blocks(raw json.RawMessage) []block {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []block{{Type: "text", Text: s}}
	}
	var bs []block
	_ = json.Unmarshal(raw, &bs)
	return bs
}

// messagesTurn finds the newest user text holding a directive and counts the tool results
// after it.
func messagesTurn(req messagesRequest) (instruction string, done int) {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		bs := blocks(m.Content)
		for _, b := range bs {
			if b.Type == "text" && strings.Contains(b.Text, "[[") && instruction == "" {
				instruction = b.Text
			}
		}
		if instruction != "" {
			return instruction, done
		}
		for _, b := range bs {
			if b.Type == "tool_result" {
				done++
			}
		}
	}
	return "", 0
}

// anthropicError is the Messages API's error body for status.
func anthropicError(status int) any {
	kind, msg := "api_error", "modelmock: scripted failure"
	switch status {
	case http.StatusTooManyRequests:
		kind, msg = "rate_limit_error", "modelmock: rate limited"
	case 529:
		kind, msg = "overloaded_error", "Overloaded"
	}
	return map[string]any{"type": "error", "error": map[string]any{"type": kind, "message": msg}}
}

func (s *Server) messages(w http.ResponseWriter, body []byte, rec *Request) int {
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return writeJSON(w, http.StatusBadRequest, map[string]any{"type": "error",
			"error": map[string]any{"type": "invalid_request_error", "message": err.Error()}})
	}
	instruction, done := messagesTurn(req)
	rec.Instruction = instruction
	sc := parse(instruction)
	if status, ok := s.turnAway(w, sc, anthropicError); ok {
		return status
	}
	st := sc.next(done)
	if len(req.Tools) == 0 { // a side call: a title, a probe
		st = step{text: "OK"}
	}
	if !req.Stream {
		return writeJSON(w, http.StatusOK, messageJSON(req.Model, st))
	}
	streamMessage(newSSE(w), req.Model, st)
	return http.StatusOK
}

// content is the assistant content block of st.
func content(st step) map[string]any {
	if st.tool == "" {
		return map[string]any{"type": "text", "text": st.text}
	}
	var input any = map[string]any{}
	_ = json.Unmarshal([]byte(st.input), &input)
	return map[string]any{"type": "tool_use", "id": "toolu_" + newID(), "name": st.tool, "input": input}
}

func stopReason(st step) string {
	if st.tool != "" {
		return "tool_use"
	}
	return "end_turn"
}

func messageJSON(model string, st step) map[string]any {
	return map[string]any{"id": "msg_" + newID(), "type": "message", "role": "assistant", "model": model,
		"content": []any{content(st)}, "stop_reason": stopReason(st), "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 100, "output_tokens": 20}}
}

// streamMessage writes st as the Messages API's event stream.
func streamMessage(e sse, model string, st step) {
	e.event("message_start", map[string]any{"message": map[string]any{"id": "msg_" + newID(), "type": "message",
		"role": "assistant", "model": model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 100, "output_tokens": 1}}})
	c := content(st)
	if st.tool == "" {
		e.event("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		e.event("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": st.text}})
	} else {
		input, _ := json.Marshal(c["input"])
		e.event("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "tool_use",
			"id": c["id"], "name": st.tool, "input": map[string]any{}}})
		e.event("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	}
	e.event("content_block_stop", map[string]any{"index": 0})
	e.event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stopReason(st), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 20}})
	e.event("message_stop", map[string]any{})
}
