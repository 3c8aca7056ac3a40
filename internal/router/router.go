package router

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/retry"
	"github.com/webordinary/webordinary/internal/tenant"
)

// Policy says what a new instruction does to a tenant's running job.
type Policy string

// Interrupt policies.
const (
	PolicyInterrupt Policy = "interrupt" // cancel the running job of the same thread; the new one runs next
	PolicyQueue     Policy = "queue"     // let it finish
)

// ErrInvalid wraps every validation failure of a Request.
var ErrInvalid = errors.New("invalid request")

// MaxInstruction bounds an instruction's size.
const MaxInstruction = 64 << 10

// MaxForward bounds the forwarded message a job carries; the rest is cut (said at the cut).
const MaxForward = 32 << 10

// DefaultReconcileEvery is Config.ReconcileEvery's default.
const DefaultReconcileEvery = 3 * time.Second

// DefaultRepeatClaimAfter is Config.RepeatClaimAfter's default. A repeated request is cheap
// and harmless: it merges into the tenant's one request and keeps its oldest since, so it
// never pushes the tenant back. It is what recovers a request lost with a node (a write cut
// off by a leader's death); at 30s, TestClusterLosesANode saw a job wait out its whole 30s.
const DefaultRepeatClaimAfter = 6 * time.Second

// Config configures a Router.
type Config struct {
	// Backend provides the broker ports. Required.
	Backend *broker.Backend
	// Policy returns a tenant's interrupt policy. Default: PolicyInterrupt for everyone.
	Policy func(ctx context.Context, t tenant.ID) Policy
	// ReconcileEvery is the reconciler's period. Default 3s.
	ReconcileEvery time.Duration
	// RepeatClaimAfter spaces repeated claim requests for a tenant that stays unowned. Default
	// DefaultRepeatClaimAfter.
	RepeatClaimAfter time.Duration
	// OnResult is called for each job result, in order per router; an error leaves the result
	// to be delivered again. Default: log it.
	OnResult func(ctx context.Context, r broker.Result) error
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Policy == nil {
		c.Policy = func(context.Context, tenant.ID) Policy { return PolicyInterrupt }
	}
	if c.ReconcileEvery == 0 {
		c.ReconcileEvery = DefaultReconcileEvery
	}
	if c.RepeatClaimAfter == 0 {
		c.RepeatClaimAfter = DefaultRepeatClaimAfter
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Router is safe for concurrent use.
type Router struct {
	cfg Config
	b   *broker.Backend
	log *slog.Logger

	mu        sync.Mutex
	unowned   map[tenant.ID]bool      // unowned with pending jobs at the last reconcile pass
	lastAsks  map[tenant.ID]time.Time // the reconciler's last claim request per tenant
	waitSince map[tenant.ID]time.Time // since when an unowned tenant has waited for a worker
	demand    Demand                  // at the last reconcile pass
	nudging   chan struct{}           // a slot per nudge under way in the background
	running   atomic.Int32            // Runs under way: nudges go to the background only then
}

// New validates cfg and returns a Router.
func New(cfg Config) (*Router, error) {
	cfg = cfg.withDefaults()
	if cfg.Backend == nil {
		return nil, errors.New("router: no backend configured")
	}
	return &Router{cfg: cfg, b: cfg.Backend, log: cfg.Logger,
		unowned: map[tenant.ID]bool{}, lastAsks: map[tenant.ID]time.Time{}, waitSince: map[tenant.ID]time.Time{},
		nudging: make(chan struct{}, maxNudging)}, nil
}

// Request is one instruction to submit.
type Request struct {
	// JobID, when set, makes Submit idempotent: submitting the same id again returns the
	// accepted job (see broker.JobIDAt). Default: a new id.
	JobID       string               `json:"jobId,omitempty"`
	Project     string               `json:"project"`
	User        string               `json:"user"`
	Thread      string               `json:"thread,omitempty"`
	Instruction string               `json:"instruction"`
	RepoURL     string               `json:"repoUrl,omitempty"`
	From        string               `json:"from,omitempty"`
	Subject     string               `json:"subject,omitempty"`
	Attachments []jobspec.Attachment `json:"attachments,omitempty"`
	MessageID   string               `json:"messageId,omitempty"`
	References  []string             `json:"references,omitempty"`
	// Action: jobspec.ActionEdit (default), ActionPublish or ActionUndo; the last two need an
	// existing Thread.
	Action string `json:"action,omitempty"`
	// Guessed marks an instruction that mail extraction guessed (jobspec.Spec.Guessed).
	Guessed bool `json:"guessed,omitempty"`
	// Forward is a forwarded message the instruction is about (jobspec.Spec.Forward); one
	// longer than MaxForward is cut there.
	Forward string `json:"forward,omitempty"`
}

func (req Request) job() (broker.Job, error) {
	t, err := tenant.New(req.Project, req.User)
	if err != nil {
		return broker.Job{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if req.Thread == "" {
		req.Thread = newThreadID()
	}
	if err := tenant.ValidatePart("thread", req.Thread); err != nil {
		return broker.Job{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	switch {
	case req.Action != jobspec.ActionEdit && req.Action != jobspec.ActionPublish && req.Action != jobspec.ActionUndo:
		return broker.Job{}, fmt.Errorf("%w: action %q: use publish or undo, or none for an edit", ErrInvalid, req.Action)
	case strings.TrimSpace(req.Instruction) == "":
		return broker.Job{}, fmt.Errorf("%w: the instruction is empty; say what to change", ErrInvalid)
	case len(req.Instruction) > MaxInstruction:
		return broker.Job{}, fmt.Errorf("%w: the instruction is %d bytes; keep it under %d", ErrInvalid, len(req.Instruction), MaxInstruction)
	}
	id := req.JobID
	if id == "" {
		id, err = broker.JobIDFor(broker.NewJobID(), t)
	} else { // kept as given, of either form: its client reads the job by it
		err = broker.CheckJobID(id, t)
	}
	if err != nil {
		return broker.Job{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	spec := jobspec.Spec{Instruction: req.Instruction, RepoURL: req.RepoURL, From: req.From, Subject: req.Subject,
		Attachments: req.Attachments, MessageID: req.MessageID, References: req.References, Action: req.Action,
		Guessed: req.Guessed, Forward: cutForward(req.Forward)}
	return spec.On(broker.Job{ID: id, Tenant: t, Thread: req.Thread, AcceptedAt: time.Now()}), nil
}

// cutForward bounds a forwarded message to MaxForward bytes, cut at a line end, saying so.
func cutForward(s string) string {
	if len(s) <= MaxForward {
		return s
	}
	s = strings.ToValidUTF8(s[:MaxForward], "")
	if i := strings.LastIndexByte(s, '\n'); i > 0 {
		s = s[:i]
	}
	return s + "\n[… the rest of the forwarded message was cut]"
}

// NewThreadID returns a new thread id ("t" + 12 hex digits).
func NewThreadID() string { return newThreadID() }

func newThreadID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:])
}

// Submit accepts req: when it returns nil error the job is durable and some worker will run it.
func (r *Router) Submit(ctx context.Context, req Request) (broker.JobRecord, error) {
	job, err := req.job()
	if err != nil {
		return broker.JobRecord{}, err
	}
	if req.JobID == "" {
		return r.submitNew(ctx, job)
	}
	// A job accepted before its producer's ids ended in their group (an upgrade between a
	// mail's two deliveries) is recorded under the id of the older form.
	if older, ok := broker.OlderJobID(job.ID); ok {
		if old, err := r.b.Jobs.Get(ctx, older); err == nil && old.Job.Tenant == job.Tenant {
			return r.resubmit(ctx, old.Job)
		}
	}
	rec := broker.QueuedRecord(job)
	err = r.b.Jobs.Create(ctx, rec)
	if errors.Is(err, broker.ErrExists) {
		return r.resubmit(ctx, job)
	}
	if err != nil {
		return rec, fmt.Errorf("router: record job: %w", err)
	}
	if err := r.b.Inbox.Publish(ctx, job); err != nil {
		return rec, enqueueError(err)
	}
	r.nudgeSoon(ctx, job)
	return rec, nil
}

// submitNew submits a job under an id made here, which no one has seen: its record is
// written while the job is published, not before, so Submit takes one round trip to the
// engine, not two (bench: 100 tenants × 20 end to end went from 1,560–1,670 to 1,840–1,990
// jobs a second). A job is accepted once published: a worker may start it before its record
// exists, and then makes the record itself (the router's write finds it and stops); a record
// that could not be written is made the same way. A job that could not be published is not
// accepted, and its record, once written, says so. An id given by the caller (a mail's, for
// idempotent retries) is recorded first instead: the record tells a retry from a new job,
// and a finished job's retry must not be published again.
func (r *Router) submitNew(ctx context.Context, job broker.Job) (broker.JobRecord, error) {
	rec := broker.QueuedRecord(job)
	recorded := make(chan error, 1)
	go func() { recorded <- r.b.Jobs.Create(ctx, rec) }()
	err := r.b.Inbox.Publish(ctx, job)
	cerr := <-recorded
	if err != nil { // the caller will not retry this id: the record must not say queued
		r.abandon(job, err)
		return rec, enqueueError(err)
	}
	if cerr != nil && !errors.Is(cerr, broker.ErrExists) {
		r.log.WarnContext(ctx, "record job; its worker will make the record", slog.String("job", job.ID), slog.Any("err", cerr))
	}
	r.nudgeSoon(ctx, job)
	return rec, nil
}

// resubmit handles a job id seen before: unless its record has a result, publish it again
// (de-duplicated by the inbox) in case the first submission stopped between record and publish.
func (r *Router) resubmit(ctx context.Context, job broker.Job) (broker.JobRecord, error) {
	rec, err := r.b.Jobs.Get(ctx, job.ID)
	if err != nil || rec.Result != nil {
		return rec, err
	}
	if err := r.b.Inbox.Publish(ctx, job); err != nil {
		return rec, enqueueError(err)
	}
	r.nudge(ctx, job)
	return rec, nil
}

func enqueueError(err error) error {
	if errors.Is(err, broker.ErrTooLarge) {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return fmt.Errorf("router: enqueue job: %w", err)
}

// abandon marks a recorded job that could not be enqueued, so its record does not claim a
// queued job that no worker will ever see.
func (r *Router) abandon(job broker.Job, cause error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = r.b.Jobs.Update(ctx, job.ID, func(rec *broker.JobRecord) error {
		rec.State, rec.LastError, rec.FinishedAt = broker.StateFailed, "not accepted: "+cause.Error(), time.Now()
		return nil
	})
}

// nudgeSoon nudges in the background, so that Submit returns once the job is durable (two
// writes, not four round trips: the submit rate bounds every end-to-end rate); with
// maxNudging already under way, it nudges before returning (back-pressure).
func (r *Router) nudgeSoon(ctx context.Context, job broker.Job) {
	// Noted at once (a reconcile pass forgets it for a tenant it finds owned): the oldest
	// wait does not depend on when the nudge runs.
	r.waiting(job.Tenant, job.AcceptedAt)
	if r.running.Load() == 0 { // no Run to wait for it at shutdown
		r.nudge(ctx, job)
		return
	}
	select {
	case r.nudging <- struct{}{}:
		go func() {
			defer func() { <-r.nudging }()
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), nudgeTimeout)
			defer cancel()
			r.nudgeUntil(ctx, job)
		}()
	default:
		r.nudge(ctx, job)
	}
}

// waitNudges waits for the nudges under way in the background (Run's end: the backend may
// close next). Nudges that start meanwhile run inline.
func (r *Router) waitNudges() {
	for range maxNudging {
		r.nudging <- struct{}{}
	}
	for range maxNudging {
		<-r.nudging
	}
}

// maxNudging bounds nudges in the background; nudgeTimeout bounds each, with its tries
// (long enough for a cluster's election, up to about 9 s).
const (
	maxNudging   = 64
	nudgeTimeout = 15 * time.Second
)

// nudgeUntil nudges, asking again while the engine does not answer (retry.Do: a cluster
// electing a leader after losing a node) until ctx ends: the reconciler would follow up
// only after two passes (TestANudgeAsksAgainWhileTheEngineDoesNot). Not past Run's end
// (shutdown waits for the nudges under way): the next start's first reconcile pass asks
// for every unowned tenant with pending jobs.
func (r *Router) nudgeUntil(ctx context.Context, job broker.Job) {
	err := retry.Do(ctx, func(ctx context.Context) error { return r.tryNudge(ctx, job) },
		func(error) bool { return r.running.Load() == 0 }, nil)
	if err != nil {
		r.nudgeFailed(ctx, job, err)
	}
}

// nudge runs after the publish: claim when unowned; when owned and the policy says so,
// interrupt a running job of the same thread (the owner corrected themselves). A running job
// of another thread is left alone: the new one waits its turn. Publish and undo never
// interrupt: they wait for the edit in progress.
// Failures here are logged, not returned: the job is accepted and the reconciler covers them.
func (r *Router) nudge(ctx context.Context, job broker.Job) {
	if err := r.tryNudge(ctx, job); err != nil {
		r.nudgeFailed(ctx, job, err)
	}
}

func (r *Router) tryNudge(ctx context.Context, job broker.Job) error {
	t := job.Tenant
	_, err := r.b.Leases.Get(ctx, t)
	switch {
	case errors.Is(err, broker.ErrNotFound):
		r.waiting(t, job.AcceptedAt)
		return r.b.Claims.Request(ctx, t, job.AcceptedAt)
	case err == nil && jobspec.Of(job).Action == jobspec.ActionEdit && r.cfg.Policy(ctx, t) == PolicyInterrupt:
		return r.b.Signals.Interrupt(ctx, t, broker.Interrupt{Before: job.ID, Thread: job.Thread, Job: carried(job),
			Reason: "a newer instruction on the same thread (" + job.ID + ")"})
	}
	return err
}

// carried is job, to travel with the interrupt it sends, when it is small enough: the owner
// that stops its thread's running job for it puts it first in the tenant's queue.
func carried(job broker.Job) *broker.Job {
	if len(job.Payload)+len(job.Bulk) > broker.MaxPromotedJob { // spare encoding what is too large anyway
		return nil
	}
	if data, err := json.Marshal(job); err != nil || len(data) > broker.MaxPromotedJob {
		return nil
	}
	return &job
}

func (r *Router) nudgeFailed(ctx context.Context, job broker.Job, err error) {
	r.log.WarnContext(ctx, "after enqueue; the reconciler will follow up",
		slog.String("tenant", job.Tenant.String()), slog.String("job", job.ID), slog.Any("err", err))
}

// Release asks t's owner to release it after its running job, if any.
func (r *Router) Release(ctx context.Context, t tenant.ID, reason string) error {
	return r.b.Signals.Interrupt(ctx, t, broker.Interrupt{Release: true, Reason: reason})
}

// Claim requests a claim for t now (an operator's nudge). Claim requests are hints: a worker
// that finds t's lease live, or nothing pending, drops it.
func (r *Router) Claim(ctx context.Context, t tenant.ID) error {
	return r.b.Claims.Request(ctx, t, time.Now())
}

// ForceRelease takes t from its owner, live or not: it deletes the lease record it reads
// (compare-and-delete on its version; the owner's next renewal fails, it stops its job and,
// fenced by the token, pushes and deploys nothing more), then requests a claim, so pending
// jobs are taken up by a worker. It reports whether there was a lease to take. For a hung
// owner; Release asks a healthy one politely.
func (r *Router) ForceRelease(ctx context.Context, t tenant.ID) (bool, error) {
	took := false
	for range 3 { // a renewal between the read and the delete: read again
		l, err := r.b.Leases.Get(ctx, t)
		if errors.Is(err, broker.ErrNotFound) {
			break
		}
		if err == nil {
			err = r.b.Leases.Release(ctx, l)
		}
		if errors.Is(err, broker.ErrLeaseLost) {
			continue
		}
		if err != nil {
			return false, err
		}
		took = true
		r.log.WarnContext(ctx, "lease taken by an operator", slog.String("tenant", t.String()), slog.String("owner", l.Owner), slog.Uint64("token", l.Token))
		break
	}
	return took, r.Claim(ctx, t)
}

// Interrupt asks the owner of job's tenant to stop job if it is running.
func (r *Router) Interrupt(ctx context.Context, jobID, reason string) error {
	rec, err := r.b.Jobs.Get(ctx, jobID)
	if err != nil {
		return err
	}
	return r.b.Signals.Interrupt(ctx, rec.Job.Tenant, broker.Interrupt{JobID: jobID, Reason: reason})
}
