package broker

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/tenant"
)

// Job is one instruction for a tenant, as it travels through the inbox.
type Job struct {
	ID          string       `json:"id"`
	Tenant      tenant.ID    `json:"tenant"`
	Thread      string       `json:"thread"`
	Instruction string       `json:"instruction"`
	RepoURL     string       `json:"repoUrl,omitempty"`
	From        string       `json:"from,omitempty"`
	Subject     string       `json:"subject,omitempty"`
	Attachments []Attachment `json:"attachments,omitempty"`
	AcceptedAt  time.Time    `json:"acceptedAt"`
	// MessageID and References of the email that carried the instruction, for threaded replies.
	MessageID  string   `json:"messageId,omitempty"`
	References []string `json:"references,omitempty"`
	// Action is what the job does: ActionEdit (empty: run the instruction), ActionPublish
	// (put the thread's branch live) or ActionUndo (revert the thread's last publish).
	Action string `json:"action,omitempty"`
	// Guessed says Instruction is the email's best candidate text: nothing in it was clearly new
	// (reply.Result.Guessed). The reply tells the sender so.
	Guessed bool `json:"guessed,omitempty"`
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
	// Data travels with the queued job; job records keep only the name, type and size.
	Data []byte `json:"data,omitempty"`
}

// QueuedRecord is the record of job as accepted: queued, without its attachments' contents.
// The router creates it, a worker recreates it when records were lost, and natsjs recognises
// it (a record created exactly so lets the worker's first update skip a read).
func QueuedRecord(job Job) JobRecord {
	return JobRecord{Job: job.WithoutData(), State: StateQueued}
}

// WithoutData returns job with its attachments' contents left out (for records).
func (job Job) WithoutData() Job {
	if len(job.Attachments) == 0 {
		return job
	}
	atts := make([]Attachment, len(job.Attachments))
	for i, a := range job.Attachments {
		size := len(a.Data)
		if size == 0 {
			size = a.Size // already without data: idempotent
		}
		atts[i] = Attachment{Name: a.Name, ContentType: a.ContentType, Size: size}
	}
	job.Attachments = atts
	return job
}

// State is where a job is in its life: queued → claimed → running → one final state.
type State string

// Job states. Claimed is derived (queued while the tenant has a live owner).
const (
	StateQueued      State = "queued"
	StateClaimed     State = "claimed"
	StateRunning     State = "running"
	StateDone        State = "done"
	StateFailed      State = "failed"
	StateInterrupted State = "interrupted"
	StateDead        State = "dead"
)

// Final reports whether s ends a job's life.
func (s State) Final() bool {
	switch s {
	case StateDone, StateFailed, StateInterrupted, StateDead:
		return true
	}
	return false
}

// JobRecord is a job's stored state.
type JobRecord struct {
	Job   Job   `json:"job"`
	State State `json:"state"`
	// Attempts counts runs started; Failures counts runs that ended in a reported failure.
	// A run cut short by a crash or a lost lease counts in Attempts only.
	Attempts   int       `json:"attempts"`
	Failures   int       `json:"failures,omitempty"`
	Worker     string    `json:"worker,omitempty"`
	LeaseToken uint64    `json:"leaseToken,omitempty"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	LastError  string    `json:"lastError,omitempty"`
	// BusySince is when the model service first turned the running job's agent away, while
	// the job waits to run it again; zero otherwise. The mail router tells the owner a job
	// that waits long (inbound.Config.WaitNoteAfter).
	BusySince time.Time `json:"busySince,omitzero"`
	Result    *Result   `json:"result,omitempty"`
}

// Result is a job's outcome.
type Result struct {
	JobID      string        `json:"jobId"`
	Tenant     tenant.ID     `json:"tenant"`
	Thread     string        `json:"thread"`
	State      State         `json:"state"`
	Summary    string        `json:"summary,omitempty"`
	Error      string        `json:"error,omitempty"`
	ExitCode   int           `json:"exitCode"`
	OutputTail string        `json:"outputTail,omitempty"`
	Duration   time.Duration `json:"duration"`
	Attempt    int           `json:"attempt"`
	Worker     string        `json:"worker,omitempty"`
	LeaseToken uint64        `json:"leaseToken,omitempty"`
	FinishedAt time.Time     `json:"finishedAt"`
	// Details is what the processor tells about the run (files changed, commit, previews...),
	// opaque to the queue layer: JSON its readers decode (the pipeline's report.Of).
	Details json.RawMessage `json:"details,omitempty"`
	// Job is the job this result is for, without attachment data, so a reply can be sent
	// and a lost record rebuilt from the result alone.
	Job *Job `json:"job,omitempty"`
}

// WorkerInfo is one worker's self-reported state.
type WorkerInfo struct {
	ID         string `json:"id"`
	Process    string `json:"process"`
	State      string `json:"state"`
	Tenant     string `json:"tenant,omitempty"`
	JobID      string `json:"jobId,omitempty"`
	LeaseToken uint64 `json:"leaseToken,omitempty"`
	// Sandbox says how this worker isolates the code its jobs run (for example
	// "bubblewrap, uid 65534" or "UNSANDBOXED"); empty when jobs run no code.
	Sandbox   string    `json:"sandbox,omitempty"`
	Heartbeat time.Time `json:"heartbeat"`
}

var idState struct {
	sync.Mutex
	last uint64
}

// JobIDAt returns the id of a job accepted at t whose identity is key (for example an email's
// Message-ID): the same t and key give the same id, so a re-submission is recognized, and ids
// still sort by acceptance time.
func JobIDAt(t time.Time, key string) string {
	sum := sha256.Sum256([]byte(key))
	return fmt.Sprintf("j%016x%08x", uint64(t.UnixNano()), binary.BigEndian.Uint32(sum[:4]))
}

// NewJobID returns an id that sorts by creation time: "j" + 16 hex digits of nanoseconds
// (strictly increasing within this process) + 8 random hex digits.
func NewJobID() string {
	idState.Lock()
	now := uint64(time.Now().UnixNano())
	if now <= idState.last {
		now = idState.last + 1
	}
	idState.last = now
	idState.Unlock()
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("j%016x%08x", now, binary.BigEndian.Uint32(r[:]))
}
