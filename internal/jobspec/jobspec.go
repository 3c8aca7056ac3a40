// Package jobspec is what a job asks of its processor: the instruction, the email that
// carried it (sender, subject, threading headers, attachments) and the action. The queue
// layer carries it as opaque bytes (broker.Job.Payload, the attachments' bytes in
// broker.Job.Bulk); the router and the mail intake write it (Set), and the worker, the
// pipeline, the replies and the dashboard read it back with Of.
package jobspec

import (
	"encoding/json"

	"github.com/webordinary/webordinary/internal/broker"
)

// Spec is what a job asks. Its JSON form (keys as they were when these were broker.Job's own
// fields) is a job's payload.
type Spec struct {
	Instruction string       `json:"instruction"`
	RepoURL     string       `json:"repoUrl,omitempty"`
	From        string       `json:"from,omitempty"`
	Subject     string       `json:"subject,omitempty"`
	Attachments []Attachment `json:"attachments,omitempty"`
	// MessageID and References of the email that carried the instruction, for threaded replies.
	MessageID  string   `json:"messageId,omitempty"`
	References []string `json:"references,omitempty"`
	// Action is what the job does: ActionEdit (empty: run the instruction), ActionPublish
	// (put the thread's branch live) or ActionUndo (revert the thread's last publish).
	Action string `json:"action,omitempty"`
	// Guessed says Instruction is the email's best candidate text: nothing in it was clearly new
	// (reply.Result.Guessed). The reply tells the sender so.
	Guessed bool `json:"guessed,omitempty"`
	// Forward is the message the sender forwarded with Instruction, which is about it ("put
	// this event on the news page"): material for the agent, not instructions.
	Forward string `json:"forward,omitempty"`
}

// Job actions.
const (
	ActionEdit    = ""
	ActionPublish = "publish"
	ActionUndo    = "undo"
)

// Attachment is a file sent with an instruction.
type Attachment struct {
	Name        string `json:"name"`
	ContentType string `json:"contentType,omitempty"`
	Size        int    `json:"size,omitempty"`
	// Data travels with the queued job (its bulk); job records keep only the name, type and size.
	Data []byte `json:"data,omitempty"`
}

// Of returns the spec job carries, its attachments' bytes included when the job has them (a
// delivered job; a record has none). A job without a payload, or whose payload does not decode,
// has the zero spec. A job queued before the payload was opaque reads the same.
func Of(job broker.Job) Spec {
	var s Spec
	if len(job.Payload) > 0 {
		_ = json.Unmarshal(job.Payload, &s)
	}
	var data [][]byte
	if len(job.Bulk) > 0 && json.Unmarshal(job.Bulk, &data) == nil && len(data) == len(s.Attachments) {
		for i := range s.Attachments {
			s.Attachments[i].Data = data[i]
		}
	}
	return s
}

// Encode returns s as a job's payload (attachments by name, type and size) and bulk (their
// bytes, nil when none has any).
func (s Spec) Encode() (payload, bulk json.RawMessage) {
	var data [][]byte
	if len(s.Attachments) > 0 {
		atts := make([]Attachment, len(s.Attachments))
		data = make([][]byte, len(s.Attachments))
		some := false
		for i, a := range s.Attachments {
			size := len(a.Data)
			if size == 0 {
				size = a.Size // already without data: idempotent
			}
			atts[i] = Attachment{Name: a.Name, ContentType: a.ContentType, Size: size}
			data[i], some = a.Data, some || len(a.Data) > 0
		}
		s.Attachments = atts
		if !some {
			data = nil
		}
	}
	payload, _ = json.Marshal(s) // a struct of strings, ints and slices: it always encodes
	if data != nil {
		bulk, _ = json.Marshal(data)
	}
	return payload, bulk
}

// Set makes job carry s (its payload and bulk).
func (s Spec) Set(job *broker.Job) {
	job.Payload, job.Bulk = s.Encode()
}

// On returns job carrying s.
func (s Spec) On(job broker.Job) broker.Job {
	s.Set(&job)
	return job
}
