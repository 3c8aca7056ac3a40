package report_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/failure"
	"github.com/webordinary/webordinary/internal/pipeline/report"
)

// TestReportRoundTrip: a report survives storage as a result's details, under the keys it had
// when it was a map, and a zero report is left out.
func TestReportRoundTrip(t *testing.T) {
	t.Parallel()
	rep := report.Report{Branch: "t-1", Commit: "abc", Files: []report.FileChange{{Status: "M", Path: "a.html"}},
		PreviewURLs: []string{"http://x/"}, AgentCostUSD: 0.5, AgentTurns: 3, StagesMs: map[string]int64{"git": 10}, Resent: true,
		Failure: failure.Build}
	raw, err := json.Marshal(broker.Result{JobID: "j", Details: rep.Encode()})
	if err != nil {
		t.Fatal(err)
	}
	var back broker.Result
	if err := json.Unmarshal(raw, &back); err != nil || !reflect.DeepEqual(report.Of(back), rep) {
		t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, report.Of(back), rep)
	}
	var keys struct{ Details map[string]any }
	_ = json.Unmarshal(raw, &keys)
	if keys.Details["previewUrls"] == nil || keys.Details["agentCostUsd"] != 0.5 || keys.Details["failure"] != "build" {
		t.Errorf("stored keys changed: %s", raw)
	}
	var zero struct{ Details map[string]any }
	if raw, _ := json.Marshal(broker.Result{JobID: "j", Details: report.Report{}.Encode()}); json.Unmarshal(raw, &zero) != nil || zero.Details != nil {
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
	want := report.Report{Commit: "abc", Files: []report.FileChange{{Status: "A", Path: "x"}}}
	if got := report.Of(res); res.JobID != "j" || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v", got)
	}
}

// TestReportOfStoredRecord: a job record stored when the report was a field of broker.Result
// (a data dir written by an older version) still reads, report and all.
func TestReportOfStoredRecord(t *testing.T) {
	t.Parallel()
	old := `{"job":{"id":"j1","tenant":{"project":"site","user":"alice"},"thread":"t1","instruction":"make it green",` +
		`"acceptedAt":"2026-01-02T03:04:05Z"},"state":"done","attempts":1,"worker":"w1","leaseToken":7,` +
		`"result":{"jobId":"j1","tenant":{"project":"site","user":"alice"},"thread":"t1","state":"done","summary":"green",` +
		`"exitCode":0,"duration":1000,"attempt":1,"finishedAt":"2026-01-02T03:04:06Z",` +
		`"details":{"branch":"thread-t1","commit":"c0ffee","previewUrls":["http://t1.site/"],"agentCostUsd":0.25,` +
		`"check":{"pictures":2,"changed":true,"summary":"fixed"},"modelRetries":1}}}`
	var rec broker.JobRecord
	if err := json.Unmarshal([]byte(old), &rec); err != nil || rec.Result == nil {
		t.Fatalf("old record: %v", err)
	}
	want := report.Report{Branch: "thread-t1", Commit: "c0ffee", PreviewURLs: []string{"http://t1.site/"}, AgentCostUSD: 0.25,
		Check: &report.Check{Pictures: 2, Changed: true, Summary: "fixed"}, ModelRetries: 1}
	if got := report.Of(*rec.Result); !reflect.DeepEqual(got, want) {
		t.Fatalf("old record's report:\n got %+v\nwant %+v", got, want)
	}
}
