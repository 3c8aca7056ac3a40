package egress_test

import (
	"context"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/egress"
)

// TestUsageIsCounted: the proxy counts the tokens the model API reports, in JSON responses
// and in streams (Anthropic's cumulative message_delta, OpenAI's response.completed).
func TestUsageIsCounted(t *testing.T) {
	t.Parallel()
	bodies := map[string]string{
		"/v1/messages": `{"type":"message","model":"claude-sonnet-4-5","usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":7}}`,
		"/v1/messages?stream": "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-haiku-4-5\",\"usage\":{\"input_tokens\":100,\"output_tokens\":1}}}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"hi\"}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":40}}\n\n",
		"/v1/responses": "data: {\"type\":\"response.created\"}\n\ndata: {\"type\":\"response.completed\",\"response\":{\"model\":\"gpt-5-mini\",\"usage\":{\"input_tokens\":1000,\"output_tokens\":300}}}\n\ndata: [DONE]\n\n",
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Path
		if r.URL.RawQuery != "" {
			key += "?" + r.URL.RawQuery
		}
		if key != "/v1/messages" {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		body := bodies[key]
		for len(body) > 0 { // in small pieces, as a stream comes
			n := min(len(body), 17)
			io.WriteString(w, body[:n])
			w.(http.Flusher).Flush()
			body = body[n:]
		}
	}))
	t.Cleanup(srv.Close)
	p, err := egress.New(egress.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	a, _ := egress.AnthropicModel(srv.URL, "real")
	o, _ := egress.OpenAIModel(srv.URL+"/v1", "real")
	s, err := p.Open(egress.Policy{Models: []egress.Model{a, o}, MaxCostUSD: 0.001})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", s.Socket)
	}}}
	call := func(path string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://proxy"+path, strings.NewReader("{}"))
		req.Header.Set("x-api-key", s.Token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/anthropic/v1/messages", "/anthropic/v1/messages?stream", "/openai/v1/responses"} {
		if code := call(path); code != 200 {
			t.Fatalf("%s: %d", path, code)
		}
	}
	// At list prices: sonnet (10 + 5 cache reads at a tenth) in, 7 out; haiku 100 in, 40 out;
	// gpt-5-mini 1,000 in, 300 out.
	cost := (10.5*3+7*15)/1e6 + (100*1+40*5)/1e6 + (1000*0.25+300*2)/1e6
	// The proxy counts a stream's last usage event as it copies it: the client may read the
	// end of the body a moment before the count, so wait for it (bounded).
	want := egress.Usage{InputTokens: 15 + 100 + 1000, OutputTokens: 7 + 40 + 300, Requests: 3}
	counted := func(got egress.Usage) bool {
		return got.InputTokens == want.InputTokens && got.OutputTokens == want.OutputTokens &&
			got.Requests == want.Requests && math.Abs(got.CostUSD-cost) <= 1e-12
	}
	got := s.Usage()
	for deadline := time.Now().Add(5 * time.Second); !counted(got) && time.Now().Before(deadline); got = s.Usage() {
		time.Sleep(5 * time.Millisecond)
	}
	if !counted(got) {
		t.Errorf("usage %+v, want %+v costing $%.7f", got, want, cost)
	}
	// The budget ($0.001) is spent: the next model call is refused, whatever the agent.
	if code := call("/openai/v1/responses"); code != http.StatusPaymentRequired {
		t.Errorf("a call over the budget: %d, want 402", code)
	}
	if spent, over := s.OverBudget(); !over || spent < 0.001 {
		t.Errorf("OverBudget = $%v, %v", spent, over)
	}
}
