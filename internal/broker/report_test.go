package broker_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/failure"
)

// TestReportRoundTrip: a report survives storage as JSON, under the keys it had when it was a
// map, and a zero report is left out.
func TestReportRoundTrip(t *testing.T) {
	t.Parallel()
	rep := broker.Report{Branch: "t-1", Commit: "abc", Files: []broker.FileChange{{Status: "M", Path: "a.html"}},
		PreviewURLs: []string{"http://x/"}, AgentCostUSD: 0.5, AgentTurns: 3, StagesMs: map[string]int64{"git": 10}, Resent: true, Failure: failure.Build}
	raw, err := json.Marshal(broker.Result{JobID: "j", Report: rep})
	if err != nil {
		t.Fatal(err)
	}
	var back broker.Result
	if err := json.Unmarshal(raw, &back); err != nil || !reflect.DeepEqual(back.Report, rep) {
		t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, back.Report, rep)
	}
	var keys struct{ Details map[string]any }
	_ = json.Unmarshal(raw, &keys)
	if keys.Details["previewUrls"] == nil || keys.Details["agentCostUsd"] != 0.5 || keys.Details["failure"] != "build" {
		t.Errorf("stored keys changed: %s", raw)
	}
	var zero struct{ Details map[string]any }
	if raw, _ := json.Marshal(broker.Result{JobID: "j"}); json.Unmarshal(raw, &zero) != nil || zero.Details != nil {
		t.Errorf("zero report stored: %s", raw)
	}
}

// TestReportLenient: a field of an unexpected type stays empty; the others and the record
// around them still decode.
func TestReportLenient(t *testing.T) {
	t.Parallel()
	raw := `{"jobId":"j","details":{"diffstat":42,"commit":"abc","files":[{"status":"A","path":"x"}],"extra":[1]}}`
	var res broker.Result
	if err := json.Unmarshal([]byte(raw), &res); err != nil {
		t.Fatal(err)
	}
	want := broker.Report{Commit: "abc", Files: []broker.FileChange{{Status: "A", Path: "x"}}}
	if res.JobID != "j" || !reflect.DeepEqual(res.Report, want) {
		t.Fatalf("got %+v", res)
	}
}
