package modelmock

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// Request is one call the mock served.
type Request struct {
	// API is "messages" (Anthropic) or "responses" (OpenAI); "" for another path.
	API string
	// Path is the request's URL path.
	Path string
	// Key is the API key it carried (x-api-key, else the Authorization bearer token).
	Key string
	// Instruction is the newest user text holding a directive ("" when none).
	Instruction string
	// Body is the request body as sent.
	Body string
	// Status is the HTTP status the mock answered.
	Status int
}

// Server is a scripted model API on the host's loopback. Safe for concurrent use.
type Server struct {
	// URL is the server's origin (http://127.0.0.1:port); the Anthropic routes answer under
	// /v1/messages and /messages, the OpenAI ones under /v1/responses and /responses.
	URL string

	srv      *httptest.Server
	mu       sync.Mutex
	requests []Request
	failed   map[string]int // failures served per directive
}

// Start starts a mock on a free loopback port; Close stops it.
func Start() *Server {
	s := &Server{failed: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Requests are the calls served so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	rec := Request{Path: r.URL.Path, Key: apiKey(r.Header), Body: string(body)}
	p := strings.TrimPrefix(r.URL.Path, "/v1")
	switch {
	case p == "/messages" && r.Method == http.MethodPost:
		rec.API = "messages"
		rec.Status = s.messages(w, body, &rec)
	case p == "/messages/count_tokens":
		rec.API = "messages"
		rec.Status = writeJSON(w, http.StatusOK, map[string]any{"input_tokens": 10})
	case p == "/responses" && r.Method == http.MethodPost:
		rec.API = "responses"
		rec.Status = s.responses(w, body, &rec)
	case p == "/models" || strings.HasPrefix(p, "/models/"):
		rec.Status = writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{}})
	default:
		rec.Status = writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"message": "modelmock: no route " + r.URL.Path}})
	}
	s.record(rec)
}

func apiKey(h http.Header) string {
	if k := h.Get("x-api-key"); k != "" {
		return k
	}
	return strings.TrimPrefix(h.Get("Authorization"), "Bearer ")
}

// step is what the model does next.
type step struct {
	tool   string // "" for the final answer
	input  string // JSON input (tool) or free text (custom)
	custom bool
	text   string // the final answer
}

// script is an instruction's directives.
type script struct {
	calls []step
	say   string
	fail  *failure
}

type failure struct {
	key      string
	status   int
	times    int
	retrySec string
}

var directive = regexp.MustCompile(`(?s)\[\[(tool|custom|say|fail) (.*?)\]\]`)

// parse reads the directives of instruction.
func parse(instruction string) script {
	sc := script{say: "Done."}
	for _, m := range directive.FindAllStringSubmatch(instruction, -1) {
		arg := strings.TrimSpace(m[2])
		switch m[1] {
		case "tool", "custom":
			name, input, _ := strings.Cut(arg, " ")
			sc.calls = append(sc.calls, step{tool: name, input: strings.TrimSpace(input), custom: m[1] == "custom"})
		case "say":
			sc.say = arg
		case "fail":
			sc.fail = parseFailure(m[0], arg)
		}
	}
	return sc
}

func parseFailure(key, arg string) *failure {
	f := strings.Fields(arg)
	if len(f) < 2 {
		return nil
	}
	status, _ := strconv.Atoi(f[0])
	times, _ := strconv.Atoi(f[1])
	fl := &failure{key: key, status: status, times: times}
	if len(f) > 2 {
		fl.retrySec = f[2]
	}
	return fl
}

// next is the step after done tool results, or the final answer.
func (sc script) next(done int) step {
	if done < len(sc.calls) {
		return sc.calls[done]
	}
	return step{text: sc.say}
}

// turnAway answers the instruction's failure while it has some left; it reports whether it
// did.
func (s *Server) turnAway(w http.ResponseWriter, sc script, body func(status int) any) (int, bool) {
	f := sc.fail
	if f == nil {
		return 0, false
	}
	s.mu.Lock()
	n := s.failed[f.key]
	if n < f.times {
		s.failed[f.key] = n + 1
	}
	s.mu.Unlock()
	if n >= f.times {
		return 0, false
	}
	if f.retrySec != "" {
		w.Header().Set("Retry-After", f.retrySec)
	}
	return writeJSON(w, f.status, body(f.status)), true
}

func writeJSON(w http.ResponseWriter, status int, v any) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
	return status
}

// sse writes server-sent events, each {"type": name, ...fields} under "event: name".
type sse struct {
	w http.ResponseWriter
}

func newSSE(w http.ResponseWriter) sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return sse{w: w}
}

func (e sse) event(name string, fields map[string]any) {
	fields["type"] = name
	b, _ := json.Marshal(fields)
	fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", name, b)
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}
