package egress

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
)

// Usage is the model tokens a session's agent used, as the model API's responses reported
// them (Anthropic Messages, OpenAI Responses and Chat Completions; JSON and streamed).
type Usage struct {
	// InputTokens counts prompt tokens, cache reads and writes included.
	InputTokens int64 `json:"inputTokens"`
	// OutputTokens counts generated tokens.
	OutputTokens int64 `json:"outputTokens"`
	// Requests counts the model requests forwarded.
	Requests int64 `json:"requests"`
	// CostUSD is what those tokens cost at list prices (see prices.go).
	CostUSD float64 `json:"costUsd"`
}

// Usage is what the session's model requests used so far.
func (s *Session) Usage() Usage {
	if s == nil {
		return Usage{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usage
}

func (s *Session) addUsage(u Usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.usage.InputTokens += u.InputTokens
	s.usage.OutputTokens += u.OutputTokens
	s.usage.Requests += u.Requests
	s.usage.CostUSD += u.CostUSD
}

// countUsage makes resp's body report the usage it carries when it is read to its end or
// closed.
func (s *Session) countUsage(route string) func(*http.Response) error {
	return func(resp *http.Response) error {
		mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		resp.Body = &usageReader{rc: resp.Body, sse: mt == "text/event-stream", route: route, done: s.addUsage}
		return nil
	}
}

// maxUsageDoc bounds what a JSON response's usage is looked for in.
const maxUsageDoc = 4 << 20

// usageReader passes a response through, reading the usage fields on the way: each SSE data
// line, or the whole JSON document (up to maxUsageDoc). Streamed counts are cumulative
// (Anthropic's message_delta), so the largest seen counts.
type usageReader struct {
	rc    io.ReadCloser
	sse   bool
	route string
	buf   bytes.Buffer
	max   tokens
	model string
	done  func(Usage)
	ended bool
}

// tokens are one response's counts by kind, for its cost.
type tokens struct{ input, cacheWrite, cacheRead, output int64 }

func (u *usageReader) Read(p []byte) (int, error) {
	n, err := u.rc.Read(p)
	u.take(p[:n])
	if err == io.EOF {
		u.end()
	}
	return n, err
}

func (u *usageReader) Close() error {
	u.end()
	return u.rc.Close()
}

func (u *usageReader) take(b []byte) {
	if !u.sse {
		if u.buf.Len()+len(b) <= maxUsageDoc {
			u.buf.Write(b)
		}
		return
	}
	u.buf.Write(b)
	for {
		line, err := u.buf.ReadBytes('\n')
		if err != nil {
			u.buf.Reset()
			u.buf.Write(line) // an incomplete line waits for the rest
			return
		}
		if data, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("data:")); ok {
			u.note(bytes.TrimSpace(data))
		}
	}
}

func (u *usageReader) end() {
	if u.ended {
		return
	}
	u.ended = true
	if !u.sse {
		u.note(u.buf.Bytes())
	}
	t := u.max
	u.done(Usage{InputTokens: t.input + t.cacheWrite + t.cacheRead, OutputTokens: t.output, Requests: 1,
		CostUSD: priceOf(u.route, u.model).cost(t)})
}

// usageDoc finds the usage in the shapes the APIs send: top level (a message, a chat
// completion, Anthropic's message_delta), in message (message_start) or in response
// (OpenAI's response.completed).
type usageDoc struct {
	Model   string    `json:"model"`
	Usage   *apiUsage `json:"usage"`
	Message *struct {
		Model string    `json:"model"`
		Usage *apiUsage `json:"usage"`
	} `json:"message"`
	Response *struct {
		Model string    `json:"model"`
		Usage *apiUsage `json:"usage"`
	} `json:"response"`
}

type apiUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	PromptTokens             int64 `json:"prompt_tokens"`
	CompletionTokens         int64 `json:"completion_tokens"`
}

func (u *usageReader) note(doc []byte) {
	var d usageDoc
	if len(doc) == 0 || doc[0] != '{' || json.Unmarshal(doc, &d) != nil {
		return
	}
	for _, m := range []string{d.Model, msgModel(d), respModel(d)} {
		if m != "" {
			u.model = m
		}
	}
	for _, a := range []*apiUsage{d.Usage, msgUsage(d), respUsage(d)} {
		if a == nil {
			continue
		}
		u.max.input = max(u.max.input, a.InputTokens+a.PromptTokens)
		u.max.cacheWrite = max(u.max.cacheWrite, a.CacheCreationInputTokens)
		u.max.cacheRead = max(u.max.cacheRead, a.CacheReadInputTokens)
		u.max.output = max(u.max.output, a.OutputTokens+a.CompletionTokens)
	}
}

func msgModel(d usageDoc) string {
	if d.Message == nil {
		return ""
	}
	return d.Message.Model
}

func respModel(d usageDoc) string {
	if d.Response == nil {
		return ""
	}
	return d.Response.Model
}

func msgUsage(d usageDoc) *apiUsage {
	if d.Message == nil {
		return nil
	}
	return d.Message.Usage
}

func respUsage(d usageDoc) *apiUsage {
	if d.Response == nil {
		return nil
	}
	return d.Response.Usage
}

// overBudget reports whether the session has spent its budget, and what it spent.
func (s *Session) overBudget() (float64, bool) {
	u := s.Usage()
	return u.CostUSD, s.policy.MaxCostUSD > 0 && u.CostUSD >= s.policy.MaxCostUSD
}

// OverBudget reports whether the job's model calls reached Policy.MaxCostUSD (and were then
// refused), and what they cost.
func (s *Session) OverBudget() (spent float64, over bool) {
	if s == nil {
		return 0, false
	}
	return s.overBudget()
}
