package agent

import (
	"testing"
	"time"
)

func TestModelBusy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		res   Result
		busy  bool
		after time.Duration
	}{
		{"claude 429 with retry-after", Result{Error: `claude reported an error: API Error: 429 {"type":"error","error":{"type":"rate_limit_error"}} (retry-after: 7)`}, true, 7 * time.Second},
		{"claude 529 overloaded", Result{Error: `API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}, true, 0},
		{"codex retry limit", Result{Error: "codex turn failed: stream error: exceeded retry limit, last status: 429 Too Many Requests; try again in 1.5s"}, true, 1500 * time.Millisecond},
		{"network on stderr", Result{Error: "codex exited with status 1", OutputTail: "error: Connection refused (os error 111)\n"}, true, 0},
		{"retry_after_ms", Result{Error: `opencode reported an error: AI_APICallError: Too Many Requests {"retry_after_ms": 2500}`}, true, 2500 * time.Millisecond},
		{"minutes", Result{Error: "API Error: 503 service unavailable, retry after 2 minutes"}, true, 2 * time.Minute},
		{"claude's request timeout", Result{Error: "claude reported an error (error_during_execution): API Error: Request timed out."}, true, 0},
		{"an ordinary failure", Result{Error: "claude reported an error: the file was not found"}, false, 0},
		{"a page about HTTP 429 that built fine", Result{OK: true, Summary: "documented status 429 and rate limits"}, false, 0},
		{"interrupted", Result{Interrupted: true, Error: "interrupted: connection reset"}, false, 0},
		{"watchdog", Result{TimedOut: WatchdogNoOutput, Error: "overloaded"}, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			after, busy := tt.res.ModelBusy()
			if busy != tt.busy || after != tt.after {
				t.Fatalf("ModelBusy() = %s, %v; want %s, %v", after, busy, tt.after, tt.busy)
			}
		})
	}
}
