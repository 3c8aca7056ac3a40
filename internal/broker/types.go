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

// Job is one unit of work for a tenant, as it travels through the inbox: who it is for, its
// id, what orders and threads it, and what it is, which the queue layer does not read.
type Job struct {
	ID     string    `json:"id"`
	Tenant tenant.ID `json:"tenant"`
	// Thread groups a tenant's jobs: a newer job interrupts a running one of its thread only.
	Thread     string    `json:"thread"`
	AcceptedAt time.Time `json:"acceptedAt"`
	// Payload is what the job is to its processor, opaque to the queue layer: JSON its
	// producer and processor agree on (jobspec.Spec). Kept in the job's record.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Bulk is the job's large content (attachments' bytes), opaque too: it travels with the
	// queued message, its dead letter and a promoted copy only; records leave it out.
	Bulk json.RawMessage `json:"bulk,omitempty"`
}

// jobKeys are the keys of Job's JSON form other than its payload.
var jobKeys = []string{"id", "tenant", "thread", "acceptedAt"}

// plainJob has Job's fields without its UnmarshalJSON.
type plainJob Job

// UnmarshalJSON decodes a job. A job written before the payload was opaque (its processor's
// fields at the top level, beside id and tenant) keeps those fields, as its payload.
func (job *Job) UnmarshalJSON(data []byte) error {
	*job = Job{}
	if err := json.Unmarshal(data, (*plainJob)(job)); err != nil {
		return err
	}
	if job.Payload != nil || job.Bulk != nil {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return err
	}
	for _, k := range jobKeys {
		delete(fields, k)
	}
	if len(fields) > 0 {
		job.Payload, _ = json.Marshal(fields)
	}
	return nil
}

// QueuedRecord is the record of job as accepted: queued, without its bulk. The router creates
// it, a worker recreates it when records were lost, and natsjs recognises it (a record created
// exactly so lets the worker's first update skip a read).
func QueuedRecord(job Job) JobRecord {
	return JobRecord{Job: job.WithoutBulk(), State: StateQueued}
}

// WithoutBulk returns job with its bulk left out (for records and results).
func (job Job) WithoutBulk() Job {
	job.Bulk = nil
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
	// Job is the job this result is for, without its bulk, so a reply can be sent
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

// A job id of the current form ends in its tenant's group (JobGroup): four hex digits of a
// hash of the tenant, so that a store can keep a tenant's records together and still find a
// record by its id alone. Ids of the older form (no group) stay valid.

// JobGroup is the group t's job ids end in.
func JobGroup(t tenant.ID) string {
	sum := sha256.Sum256([]byte(t.String()))
	return fmt.Sprintf("%04x", binary.BigEndian.Uint16(sum[:2]))
}

// JobIDFor returns id (of either form) as an id of t's: id with t's group appended when it has
// none, id itself when it ends in t's group, and an error when it is no job id or ends in
// another tenant's group. The same id and tenant always give the same result.
func JobIDFor(id string, t tenant.ID) (string, error) {
	if olderJobID(id) {
		return id + JobGroup(t), nil
	}
	return id, CheckJobID(id, t)
}

// IsJobID reports whether id is a job id of either form.
func IsJobID(id string) bool {
	_, grouped := JobGroupOf(id)
	return grouped || olderJobID(id)
}

// CheckJobID returns nil for a job id of either form that can be t's: of the older form, or
// ending in t's group.
func CheckJobID(id string, t tenant.ID) error {
	switch g, ok := JobGroupOf(id); {
	case !IsJobID(id):
		return fmt.Errorf("job id %q is not of the form j + 28 hex digits (24 for an older one)", id)
	case ok && g != JobGroup(t):
		return fmt.Errorf("job id %q is of another tenant than %s", id, t)
	}
	return nil
}

// OlderJobID returns the id of the older form that id, ending in a group, extends; false for
// an id that ends in none.
func OlderJobID(id string) (string, bool) {
	if _, ok := JobGroupOf(id); !ok {
		return "", false
	}
	return id[:len(id)-4], true
}

func olderJobID(id string) bool {
	return len(id) == len("j")+24 && id[0] == 'j' && isJobHex(id[1:])
}

// JobGroupOf returns the group id ends in; false for an id of the older form or no job id.
func JobGroupOf(id string) (string, bool) {
	if len(id) != len("j")+28 || id[0] != 'j' || !isJobHex(id[1:]) {
		return "", false
	}
	return id[len(id)-4:], true
}

func isJobHex(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
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
