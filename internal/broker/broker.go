package broker

import (
	"context"
	"errors"
	"time"

	"github.com/webordinary/webordinary/internal/tenant"
)

// Sentinel errors; backends map their native errors onto these.
var (
	// ErrLeaseHeld: another owner holds a live lease on the tenant.
	ErrLeaseHeld = errors.New("lease held by another worker")
	// ErrLeaseLost: the lease expired or was taken over; the holder must stop at once.
	ErrLeaseLost = errors.New("lease lost")
	// ErrNotFound: no such record, lease or message.
	ErrNotFound = errors.New("not found")
	// ErrExists: a record with that key already exists.
	ErrExists = errors.New("already exists")
	// ErrNoMessage: nothing arrived within the wait.
	ErrNoMessage = errors.New("no message")
	// ErrConflict: a compare-and-set lost to a concurrent writer; re-read and retry.
	ErrConflict = errors.New("concurrent update")
	// ErrTooLarge: a message exceeds what the backend accepts; retrying cannot help.
	ErrTooLarge = errors.New("message too large for the engine")
	// ErrPartial: part of the engine did not answer; the result returned with it covers the
	// rest (Inbox.Tenants, while one shard of several elects a leader).
	ErrPartial = errors.New("part of the engine did not answer; the result is partial")
)

// JobRetention is how long every backend keeps a job's record after its last update; what
// hangs off a job (its pictures) is kept as long.
const JobRetention = 30 * 24 * time.Hour

// Backend bundles one backend's implementation of every port.
type Backend struct {
	Inbox    Inbox
	Claims   Claims
	Leases   Leases
	Results  Results
	Signals  Signals
	Jobs     Jobs
	Presence Presence
	// Table opens (creating when missing) a small durable key-value table of records other
	// than jobs: projects, threads. name is ^[a-z0-9_]+$.
	Table func(ctx context.Context, name string) (Table, error)
	// Blobs opens (creating when missing) a named blob store (see Blobs). name is ^[a-z0-9_]+$.
	Blobs func(ctx context.Context, name string, opts ...BlobOption) (Blobs, error)
	// Close releases the backend's connections (not the data) and, when Open started an
	// engine for it, that engine.
	Close func() error
	// Describe says what the backend is, for people (no secrets), e.g. "NATS at nats://h:4222".
	Describe string
	// Endpoint is where other processes join this backend (a URL without credentials for
	// broker.Open), or "" when they cannot (an in-process engine).
	Endpoint string
}

// Inbox is the set of per-tenant FIFO input queues.
type Inbox interface {
	// Publish appends job to the queue of job.Tenant. When it returns nil the job is durable
	// (on the backend's configured sync policy). Publishing the same job.ID again within the
	// backend's de-duplication window is a no-op that returns nil.
	Publish(ctx context.Context, job Job) error
	// Open starts consuming t's queue in order, one message at a time. The caller must hold
	// t's lease. Any delivery left unacknowledged by a previous holder becomes available
	// again at once, first in line. Only one Queue per tenant may be open at a time.
	Open(ctx context.Context, t tenant.ID, opts QueueOptions) (Queue, error)
	// Pending counts t's messages not yet removed: waiting, in flight, and acknowledged ones
	// an open queue has not removed yet. A backend may remove acknowledged messages together
	// (natsjs: one synced write for several): a queue removes them before Close returns, so
	// a count read after Close is exact, and in the background once its owner idles (natsjs:
	// a read finds nothing twice at the same place), so the count comes right soon after.
	Pending(ctx context.Context, t tenant.ID) (int, error)
	// Tenants returns every tenant with pending messages and their counts. When part of the
	// engine does not answer it may return those of the rest with an error wrapping ErrPartial.
	Tenants(ctx context.Context) (map[tenant.ID]int, error)
	// DeadLetters lists the messages dead-lettered for t, oldest first.
	DeadLetters(ctx context.Context, t tenant.ID) ([]DeadLetter, error)
	// RemoveDeadLetter deletes the dead letter of jobID from t's dead-letter queue (after an
	// operator retried or discarded it). Idempotent.
	RemoveDeadLetter(ctx context.Context, t tenant.ID, jobID string) error
}

// QueueOptions tune an open tenant queue.
type QueueOptions struct {
	// AckWait is how long a delivery stays invisible to others without Extend before it is
	// delivered again. Zero means one minute.
	AckWait time.Duration
}

// Queue is one owner's open view of a tenant's queue.
type Queue interface {
	// Next returns the next message in order, waiting at most wait. It returns ErrNoMessage
	// when none arrived. A delivery that is neither acknowledged, retried nor dead-lettered
	// blocks the queue: Next returns nothing newer until it is settled or its AckWait passes.
	Next(ctx context.Context, wait time.Duration) (Delivery, error)
	// Close stops consuming and removes the consumer state. Settle every delivery first;
	// an unsettled one is delivered again to the next Open. Idempotent.
	Close(ctx context.Context) error
}

// Delivery is one received message. Settling twice is not an error for Ack.
type Delivery interface {
	Job() Job
	// Attempt is how many times the backend has delivered this message to this consumer (1 first).
	Attempt() int
	// Behind is how many messages were queued behind this one when it was delivered, or -1
	// when the backend cannot tell. A hint: 0 lets an owner release at once when others wait.
	Behind() int
	// Extend resets the AckWait clock (a heartbeat while the job runs).
	Extend(ctx context.Context) error
	// Ack removes the message from the queue for good: it is never delivered again by this
	// queue, and leaves Pending's count as Inbox.Pending tells. Idempotent.
	Ack(ctx context.Context) error
	// Retry gives the message back to be delivered again, first in line, after delay.
	Retry(ctx context.Context, delay time.Duration) error
	// DeadLetter moves the message to the tenant's dead-letter queue with reason, then removes it.
	DeadLetter(ctx context.Context, reason string) error
}

// DeadLetter is a message moved aside after it kept failing.
type DeadLetter struct {
	Job    Job       `json:"job"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Claims is the shared set of claim requests: hints that a tenant has work and no owner.
// The lease is the truth; a claim for a tenant with a live lease is simply dropped.
//
// Fair: a tenant has at most one request outstanding, and requests are handed out oldest
// since first, so asking again never pushes a tenant back, and the tenant whose work has
// waited longest for a worker is served first.
type Claims interface {
	// Request asks a worker to claim t, whose work has waited for one since since. The zero
	// time means "longer than any dated request" (a tenant whose owner vanished: it waited a
	// lease TTL already). A request for a tenant with one waiting merges into it, keeping the
	// earlier since. A request for a tenant whose request is handed out but not yet
	// acknowledged makes it waiting again (again keeping the earlier since): a request made
	// while a worker decides on an older one is never lost, even if that worker drops it.
	// Safe for concurrent use; a request after the last one was acknowledged is always new.
	Request(ctx context.Context, t tenant.ID, since time.Time) error
	// Next blocks until a request is waiting or ctx ends, then hands out the one with the
	// oldest since (ties: the one made first). A request not acknowledged within the backend's
	// hand-out time is waiting again, in its place.
	Next(ctx context.Context) (Claim, error)
	// Waiting counts tenants with a request waiting (not handed out). Workers ask it often
	// (an owner releases early when others wait): a backend serves it without a round trip
	// where it can, and may lag its engine briefly.
	Waiting(ctx context.Context) (int, error)
}

// WarmClaims is an optional capability of Claims: warm-workspace affinity (Temporal's sticky
// queue). A backend that does not implement it hands every request to anyone, which still
// satisfies every Claims promise; use Warm to call it.
//
// A connection stands for a process: its workers share a workspace directory, so a tenant's
// warm workspace belongs to the connection whose worker last owned it.
type WarmClaims interface {
	// Warm says this connection holds t's workspace warm until until. A request for t waiting
	// before until is handed out only to this connection's Next calls and does not count in
	// other connections' Waiting; from until on, it goes to anyone, in its place by since.
	// A hand-out or an acknowledgement of t's request ends the preference. Warm never delays
	// a request past until, never loses one, and creates none (a tenant without a request
	// stays without one). Safe for concurrent use; a later Warm replaces an earlier one.
	Warm(ctx context.Context, t tenant.ID, until time.Time) error
}

// Warm calls c's Warm when c implements WarmClaims; otherwise it does nothing.
func Warm(ctx context.Context, c Claims, t tenant.ID, until time.Time) error {
	if w, ok := c.(WarmClaims); ok {
		return w.Warm(ctx, t, until)
	}
	return nil
}

// Claim is one handed-out claim request.
type Claim interface {
	Tenant() tenant.ID
	// RequestedAt is when the request was first made (zero if unknown).
	RequestedAt() time.Time
	// Ack removes the request, unless it was requested again after it was handed out (then it
	// stays waiting). Idempotent.
	Ack(ctx context.Context) error
}

// Lease is a holder's view of its ownership of a tenant.
type Lease struct {
	Tenant tenant.ID `json:"tenant"`
	Owner  string    `json:"owner"`
	// Token is the fencing token: it increases strictly with every acquisition of the tenant's
	// lease and stays the same across renewals of one acquisition. Tokens of different
	// tenants are not ordered with one another.
	Token     uint64        `json:"token"`
	ClaimedAt time.Time     `json:"claimedAt"`
	ExpiresAt time.Time     `json:"expiresAt"`
	TTL       time.Duration `json:"ttl"`
	// Version is the backend's compare-and-set handle for the current record; opaque.
	Version uint64 `json:"-"`
}

// Leases stores tenant ownership with a time to live.
type Leases interface {
	// Acquire takes t for owner for ttl, or returns ErrLeaseHeld while another lease is live.
	// Exactly one of any number of concurrent callers succeeds.
	Acquire(ctx context.Context, t tenant.ID, owner string, ttl time.Duration) (Lease, error)
	// Renew extends l by its TTL from now. ErrLeaseLost when l expired or was replaced;
	// a renewal never resurrects an expired lease.
	Renew(ctx context.Context, l Lease) (Lease, error)
	// Release deletes l if it is still the current lease (compare-and-delete on its version).
	// ErrLeaseLost when it is not; the caller treats that as already released.
	Release(ctx context.Context, l Lease) error
	// Get returns t's live lease, or ErrNotFound.
	Get(ctx context.Context, t tenant.ID) (Lease, error)
	// List returns every live lease.
	List(ctx context.Context) ([]Lease, error)
	// Expired delivers tenants whose lease ran out (not released) until ctx ends, so their
	// pending work is re-claimed without waiting for a reconciler pass. Best effort; a backend
	// without expiry notifications returns a nil channel and relies on the reconciler.
	Expired(ctx context.Context) (<-chan tenant.ID, error)
}

// Results is the stream of job outcomes the router turns into replies.
type Results interface {
	// Publish appends r. Publishing a result for the same r.JobID again within the
	// de-duplication window is a no-op, so a redelivered job can safely re-send its result.
	Publish(ctx context.Context, r Result) error
	// Next blocks for the next unacknowledged result (shared by all router instances).
	Next(ctx context.Context) (ResultDelivery, error)
}

// ResultDelivery is one received result.
type ResultDelivery interface {
	Result() Result
	// Attempt is how many times this result has been delivered (1 first).
	Attempt() int
	// Ack removes the result from the router's queue. Idempotent.
	Ack(ctx context.Context) error
}

// RecordedResult is an optional capability of ResultDelivery: the backend knows the job's
// record already holds this result as final, written by the holder that published it under
// the same lease, and still in the store, so the router need not read it back to make it so.
type RecordedResult interface {
	Recorded() bool
}

// Signals carries best-effort, low-latency notices to a tenant's current owner. A lost
// signal costs latency, never correctness.
type Signals interface {
	// Interrupt asks t's owner to stop a running job (see Interrupt for which).
	Interrupt(ctx context.Context, t tenant.ID, in Interrupt) error
	// Watch delivers t's interrupts until stop is called.
	Watch(ctx context.Context, t tenant.ID) (in <-chan Interrupt, stop func(), err error)
}

// Interrupt names the job to stop.
type Interrupt struct {
	// JobID, when set, stops exactly that job if it is running.
	JobID string `json:"jobId,omitempty"`
	// Before, when set, stops a running job accepted before this job id (a newer instruction
	// took over). Job ids sort by acceptance time.
	Before string `json:"before,omitempty"`
	// Thread, with Before, narrows it to a running job of this thread: a newer instruction on
	// the same thread corrects the running one; one on another thread waits its turn.
	Thread string `json:"thread,omitempty"`
	// Job, with Before, is that newer job itself, when it is small enough (MaxPromotedJob):
	// an owner that interrupts its running job for it promotes it (Promoter), so the
	// correction runs next, ahead of the other threads' jobs queued before it.
	Job *Job `json:"job,omitempty"`
	// Release asks the owner to release the tenant once its running job (if any) ends.
	Release bool   `json:"release,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Jobs is the records store for job state.
type Jobs interface {
	// Create stores a new record; ErrExists if the id is taken.
	Create(ctx context.Context, rec JobRecord) error
	// Get returns the record or ErrNotFound.
	Get(ctx context.Context, id string) (JobRecord, error)
	// Update applies fn to the current record and stores it with compare-and-set, retrying on
	// concurrent writers. fn may be called more than once; returning an error aborts: nothing
	// is stored, and Update returns that error with the record as fn left it.
	Update(ctx context.Context, id string, fn func(*JobRecord) error) (JobRecord, error)
	// Recent returns up to n records, newest (by job id) first. Its cost follows n, not the
	// number of records kept: status pages poll it.
	Recent(ctx context.Context, n int) ([]JobRecord, error)
	// Wait returns the record once until(rec) holds, or when ctx ends.
	Wait(ctx context.Context, id string, until func(JobRecord) bool) (JobRecord, error)
}

// Presence records which workers are alive and what they do, for status and the dashboard.
type Presence interface {
	// Announce stores w, expiring after ttl unless announced again.
	Announce(ctx context.Context, w WorkerInfo, ttl time.Duration) error
	// Leave removes w at once. Idempotent.
	Leave(ctx context.Context, id string) error
	// List returns the live workers.
	List(ctx context.Context) ([]WorkerInfo, error)
}

// Table is a small durable key-value table. Values are opaque bytes (JSON by convention);
// versions are compare-and-set handles.
type Table interface {
	// Get returns the value and its version, or ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, uint64, error)
	// Create stores a new key; ErrExists if it is there.
	Create(ctx context.Context, key string, value []byte) (uint64, error)
	// Update replaces the value if its version is still version; ErrConflict otherwise.
	Update(ctx context.Context, key string, value []byte, version uint64) (uint64, error)
	// Put stores the value whatever is there.
	Put(ctx context.Context, key string, value []byte) (uint64, error)
	// Delete removes the key. Idempotent.
	Delete(ctx context.Context, key string) error
	// Keys lists every key, sorted.
	Keys(ctx context.Context) ([]string, error)
}
