package brokertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// Tenants used by the tests. Every test has its own backend, so fixed names cannot collide.
var (
	tenantA = tenant.ID{Project: "site-a", User: "alice"}
	tenantB = tenant.ID{Project: "site-b", User: "bob"}
	tenantC = tenant.ID{Project: "site-c", User: "carol"}
)

// newJob returns a job for t numbered n, with a payload and a bulk so a round trip is checked
// whole.
func newJob(t tenant.ID, n int) broker.Job {
	return broker.Job{
		ID:         jobIDOf(t),
		Tenant:     t,
		Thread:     "thread-1",
		AcceptedAt: time.Now().UTC(),
		Payload:    payloadOf(fmt.Sprintf("job %d for %s", n, t)),
		Bulk:       json.RawMessage(fmt.Sprintf(`["/9j/%02x=="]`, n%64)),
	}
}

// jobIDOf returns a new job id of t's (in t's group, as the router makes them).
func jobIDOf(t tenant.ID) string {
	id, err := broker.JobIDFor(broker.NewJobID(), t)
	if err != nil {
		panic(err)
	}
	return id
}

// testPayload is the payload of the suite's jobs: a label that names the job in failures.
type testPayload struct {
	Label string `json:"label"`
}

// payloadOf returns the payload labelled label.
func payloadOf(label string) json.RawMessage {
	raw, _ := json.Marshal(testPayload{Label: label})
	return raw
}

// label returns the label of job's payload ("" without one).
func label(job broker.Job) string {
	var p testPayload
	_ = json.Unmarshal(job.Payload, &p)
	return p.Label
}

// newRecord returns a queued job record for t.
func newRecord(t tenant.ID, n int) broker.JobRecord {
	return broker.JobRecord{Job: newJob(t, n), State: broker.StateQueued}
}

// newResult returns a done result for a job of t.
func newResult(t tenant.ID, n int) broker.Result {
	return broker.Result{
		JobID:      jobIDOf(t),
		Tenant:     t,
		Thread:     "thread-1",
		State:      broker.StateDone,
		Summary:    fmt.Sprintf("result %d", n),
		Duration:   time.Duration(n) * time.Second,
		Attempt:    1,
		Worker:     "worker-1",
		LeaseToken: uint64(n),
		FinishedAt: time.Now().UTC(),
		Details:    json.RawMessage(fmt.Sprintf(`{"commit":"c0ffee%d"}`, n)),
	}
}

// newWorker returns a worker announcement.
func newWorker(id, state string) broker.WorkerInfo {
	return broker.WorkerInfo{ID: id, Process: "test", State: state, Heartbeat: time.Now().UTC()}
}

// sameJob compares jobs, times by instant (a round trip may change their location).
func sameJob(a, b broker.Job) bool {
	if !a.AcceptedAt.Equal(b.AcceptedAt) {
		return false
	}
	a.AcceptedAt, b.AcceptedAt = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

// sameRecord compares job records, times by instant.
func sameRecord(a, b broker.JobRecord) bool {
	if !sameJob(a.Job, b.Job) || !a.StartedAt.Equal(b.StartedAt) || !a.FinishedAt.Equal(b.FinishedAt) {
		return false
	}
	if (a.Result == nil) != (b.Result == nil) || a.Result != nil && !sameResult(*a.Result, *b.Result) {
		return false
	}
	a.Job, b.Job = broker.Job{}, broker.Job{}
	a.StartedAt, b.StartedAt, a.FinishedAt, b.FinishedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	a.Result, b.Result = nil, nil
	return reflect.DeepEqual(a, b)
}

// sameResult compares results, times by instant.
func sameResult(a, b broker.Result) bool {
	if !a.FinishedAt.Equal(b.FinishedAt) {
		return false
	}
	a.FinishedAt, b.FinishedAt = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

// sameWorker compares worker announcements, times by instant.
func sameWorker(a, b broker.WorkerInfo) bool {
	if !a.Heartbeat.Equal(b.Heartbeat) {
		return false
	}
	a.Heartbeat, b.Heartbeat = time.Time{}, time.Time{}
	return a == b
}

// sameHolder reports whether two leases are the same acquisition.
func sameHolder(a, b broker.Lease) bool {
	return a.Tenant == b.Tenant && a.Owner == b.Owner && a.Token == b.Token
}

// fatalIfErr stops the test when err is not nil; what says what was being done.
func fatalIfErr(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: expected no error, got %v", what, err)
	}
}

// expectErr checks that err is want; what says what was done.
func expectErr(t *testing.T, err, want error, what string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: expected %v, got %v", what, want, err)
	}
}
