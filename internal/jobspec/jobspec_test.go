package jobspec_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/tenant"
)

var alice = tenant.ID{Project: "site", User: "alice"}

func full() jobspec.Spec {
	return jobspec.Spec{Instruction: "make it green", RepoURL: "https://git.example/site.git", From: "alice@example.com",
		Subject: "colours", MessageID: "<m1@example.com>", References: []string{"<m0@example.com>"},
		Action: jobspec.ActionPublish, Guessed: true,
		Attachments: []jobspec.Attachment{{Name: "a.jpg", ContentType: "image/jpeg", Data: []byte{0xff, 0xd8}}, {Name: "b.txt", Data: []byte("hi")}}}
}

// TestSpecRoundTrip: a spec survives a queued message whole, and a job's record keeps its
// attachments by name, type and size only.
func TestSpecRoundTrip(t *testing.T) {
	t.Parallel()
	want := full()
	job := want.On(broker.Job{ID: "j1", Tenant: alice, Thread: "t1", AcceptedAt: time.Now().UTC()})
	raw, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	want.Attachments[0].Size, want.Attachments[1].Size = 2, 2 // a delivered job tells them too
	var back broker.Job
	if err := json.Unmarshal(raw, &back); err != nil || !reflect.DeepEqual(jobspec.Of(back), want) {
		t.Fatalf("queued message: %v\n got %+v\nwant %+v", err, jobspec.Of(back), want)
	}
	rec := broker.QueuedRecord(back)
	raw, _ = json.Marshal(rec)
	if strings.Contains(string(raw), "/9g=") || rec.Job.Bulk != nil {
		t.Fatalf("the record keeps the attachments' bytes: %s", raw)
	}
	got := jobspec.Of(rec.Job)
	if got.Instruction != want.Instruction || len(got.Attachments) != 2 || got.Attachments[0].Size != 2 || got.Attachments[0].Data != nil ||
		got.Attachments[1].ContentType != "" || got.Attachments[1].Size != 2 {
		t.Fatalf("record's spec %+v", got)
	}
	if p, b := (jobspec.Spec{Instruction: "x"}).Encode(); b != nil || string(p) != `{"instruction":"x"}` {
		t.Errorf("spec without attachments: payload %s, bulk %s", p, b)
	}
}

// TestSpecOfStoredJob: a queued message and a job record written when these fields were
// broker.Job's own (a data dir or a queue written by an older version) still read, spec and all.
func TestSpecOfStoredJob(t *testing.T) {
	t.Parallel()
	msg := `{"id":"j1","tenant":{"project":"site","user":"alice"},"thread":"t1","instruction":"make it green",` +
		`"repoUrl":"https://git.example/site.git","from":"alice@example.com","subject":"colours",` +
		`"attachments":[{"name":"a.jpg","contentType":"image/jpeg","data":"/9g="},{"name":"b.txt","data":"aGk="}],` +
		`"acceptedAt":"2026-01-02T03:04:05Z","messageId":"<m1@example.com>","references":["<m0@example.com>"],` +
		`"action":"publish","guessed":true}`
	var job broker.Job
	if err := json.Unmarshal([]byte(msg), &job); err != nil {
		t.Fatal(err)
	}
	if job.ID != "j1" || job.Tenant != alice || job.Thread != "t1" || !job.AcceptedAt.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Fatalf("old message's job: %+v", job)
	}
	if got, want := jobspec.Of(job), full(); !reflect.DeepEqual(got, want) {
		t.Fatalf("old message's spec:\n got %+v\nwant %+v", got, want)
	}

	old := `{"job":{"id":"j1","tenant":{"project":"site","user":"alice"},"thread":"t1","instruction":"make it green",` +
		`"from":"alice@example.com","attachments":[{"name":"a.jpg","contentType":"image/jpeg","size":2}],` +
		`"acceptedAt":"2026-01-02T03:04:05Z","messageId":"<m1@example.com>"},"state":"done","attempts":1,` +
		`"result":{"jobId":"j1","tenant":{"project":"site","user":"alice"},"thread":"t1","state":"done","exitCode":0,` +
		`"duration":1,"attempt":1,"finishedAt":"2026-01-02T03:04:06Z","job":{"id":"j1","tenant":{"project":"site","user":"alice"},` +
		`"thread":"t1","instruction":"make it green","from":"alice@example.com","acceptedAt":"2026-01-02T03:04:05Z"}}}`
	var rec broker.JobRecord
	if err := json.Unmarshal([]byte(old), &rec); err != nil || rec.Result == nil || rec.Result.Job == nil {
		t.Fatalf("old record: %v", err)
	}
	want := jobspec.Spec{Instruction: "make it green", From: "alice@example.com", MessageID: "<m1@example.com>",
		Attachments: []jobspec.Attachment{{Name: "a.jpg", ContentType: "image/jpeg", Size: 2}}}
	if got := jobspec.Of(rec.Job); rec.Job.ID != "j1" || rec.State != broker.StateDone || !reflect.DeepEqual(got, want) {
		t.Fatalf("old record's spec:\n got %+v\nwant %+v", got, want)
	}
	if got := jobspec.Of(*rec.Result.Job); got.From != "alice@example.com" || got.Instruction != "make it green" {
		t.Fatalf("old result's job: %+v", got)
	}
	// Stored again by the new code, the record reads the same.
	raw, _ := json.Marshal(rec)
	var again broker.JobRecord
	if err := json.Unmarshal(raw, &again); err != nil || !reflect.DeepEqual(jobspec.Of(again.Job), want) {
		t.Fatalf("old record stored again: %v, %s", err, raw)
	}
}
