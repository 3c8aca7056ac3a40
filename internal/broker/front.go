package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/retry"
	"github.com/webordinary/webordinary/internal/tenant"
)

// The front of a tenant's queue. A tenant's queue is FIFO, but a job that corrects the one
// running (a newer instruction on its thread) must run next, ahead of the other threads' jobs
// queued before it. Its owner, which alone knows that it interrupted the running job for it,
// promotes it (Promote): the job is written to the tenant's record in the front table, and the
// queue opened with OpenQueue delivers the jobs of that record before any other job not yet
// delivered. The job's own message stays where it was, so counts (Pending, Tenants) and claims
// stay the backend's; when it comes up, it is settled as its promoted copy was (acknowledged or
// dead-lettered) and passed over. Written once over the ports, so every backend honours it.
//
// The record (key tenant.ID.Name()) survives its owner: an owner that crashes leaves its
// promoted jobs for the next one. A delivery in flight when a job is promoted stays first: the
// entry names it (After), and waits until it is settled; a next owner delivers it again first
// (the inner queue's unsettled delivery), then the promoted jobs. Were it settled and the
// crash came before the entry was told, the inner queue's first delivery is another job: the
// entry no longer waits, and the promoted job comes after that one.

// FrontTable is the table that holds the tenants' promoted jobs (see OpenQueue).
const FrontTable = "front"

// MaxPromotedJob bounds a job (its JSON) carried in an Interrupt for promotion: a job larger
// (a big bulk) is not carried, and waits its turn.
const MaxPromotedJob = 64 << 10

// frontSettled: how a promoted job was settled through the front; its message is settled the
// same way when it comes up.
const (
	frontAcked = "ack"
	frontDead  = "dead"
)

// frontRecord is a tenant's promoted jobs, in promotion order.
type frontRecord struct {
	Jobs []frontEntry `json:"jobs"`
}

type frontEntry struct {
	Job      Job       `json:"job"`
	At       time.Time `json:"at"`
	Attempts int       `json:"attempts,omitempty"`
	Settled  string    `json:"settled,omitempty"` // "", frontAcked or frontDead
	Reason   string    `json:"reason,omitempty"`  // a dead letter's
	// After is the inner queue's delivery in flight when the job was promoted; the job waits
	// until it is settled.
	After string `json:"after,omitempty"`
}

// find returns the entry of job id, or nil.
func (r *frontRecord) find(id string) *frontEntry {
	for i := range r.Jobs {
		if r.Jobs[i].Job.ID == id {
			return &r.Jobs[i]
		}
	}
	return nil
}

// next returns the first entry not yet settled, or nil.
func (r *frontRecord) next() *frontEntry {
	for i := range r.Jobs {
		if r.Jobs[i].Settled == "" {
			return &r.Jobs[i]
		}
	}
	return nil
}

// Promoter is what a queue opened with OpenQueue does beyond Queue.
type Promoter interface {
	// Promote puts job, published to this queue's tenant and not yet delivered, at the front:
	// it is delivered after the delivery in flight (if any) and the jobs promoted before it,
	// ahead of every other job. Durable when it returns nil; promoting a job again is a no-op.
	// Safe for concurrent use with Next and the deliveries' settling.
	Promote(ctx context.Context, job Job) error
}

// Promote promotes job on q (see Promoter); it returns false when q cannot (not opened with
// OpenQueue, or without a front table).
func Promote(ctx context.Context, q Queue, job Job) (bool, error) {
	p, ok := q.(Promoter)
	if !ok {
		return false, nil
	}
	return true, p.Promote(ctx, job)
}

// OpenQueue opens t's queue on in with the front kept in front (the FrontTable, opened once by
// the caller); with a nil front it is in.Open's queue.
func OpenQueue(ctx context.Context, in Inbox, front Table, t tenant.ID, opts QueueOptions) (Queue, error) {
	q, err := in.Open(ctx, t, opts)
	if err != nil || front == nil {
		return q, err
	}
	if opts.AckWait <= 0 {
		opts.AckWait = time.Minute
	}
	return &frontQueue{inner: q, t: t, key: t.Name(), table: front, ackWait: opts.AckWait}, nil
}

// frontQueue is a tenant's queue with its front. Its owner is the only writer of the tenant's
// record, so the record is read once and then kept; a write that loses a compare-and-set (a
// stale owner wrote) reads it again.
type frontQueue struct {
	inner   Queue
	t       tenant.ID
	key     string
	table   Table
	ackWait time.Duration

	mu      sync.Mutex
	loaded  bool
	exists  bool
	version uint64
	rec     frontRecord
	held    *frontDelivery // delivered from the front, not settled
	busy    *passDelivery  // delivered from the inner queue, not acknowledged or dead-lettered
}

var (
	_ Queue    = (*frontQueue)(nil)
	_ Promoter = (*frontQueue)(nil)
)

// Next delivers, in order: the delivery in flight again (the inner queue's, or the front's
// once its AckWait or retry delay has passed), the promoted jobs, then the inner queue's.
func (q *frontQueue) Next(ctx context.Context, wait time.Duration) (Delivery, error) {
	deadline := time.Now().Add(wait)
	for {
		d, until, err := q.fromFront(ctx)
		switch {
		case err != nil:
			return nil, err
		case d != nil:
			return d, nil
		case !until.IsZero():
			if !time.Now().Before(deadline) {
				return nil, ErrNoMessage
			}
			if until.After(deadline) {
				until = deadline
			}
			if err := retry.Sleep(ctx, time.Until(until)); err != nil {
				return nil, err
			}
			continue
		}
		in, err := q.inner.Next(ctx, max(time.Until(deadline), 0))
		if err != nil {
			return nil, err
		}
		if d, err := q.pass(ctx, in); d != nil || err != nil {
			return d, err
		}
	}
}

// fromFront returns the front's next delivery, or when the held one comes again (until), or
// neither (the inner queue's turn).
func (q *frontQueue) fromFront(ctx context.Context) (d *frontDelivery, until time.Time, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.busy != nil {
		return nil, time.Time{}, nil // the inner queue's delivery in flight comes first
	}
	if h := q.held; h != nil {
		if now := time.Now(); now.Before(h.due) {
			return nil, h.due, nil
		}
		q.held = nil // its AckWait or retry delay has passed: deliver it again
	}
	if err := q.loadLocked(ctx); err != nil {
		return nil, time.Time{}, err
	}
	e := q.rec.next()
	if e == nil || e.After != "" {
		return nil, time.Time{}, nil // nothing promoted, or the job in flight before it comes first
	}
	id := e.Job.ID
	err = q.updateLocked(ctx, func(r *frontRecord) bool {
		if e := r.find(id); e != nil && e.Settled == "" {
			e.Attempts++
			return true
		}
		return false
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	if e = q.rec.find(id); e == nil || e.Settled != "" {
		return nil, time.Now(), nil // settled meanwhile: look again
	}
	q.held = &frontDelivery{q: q, job: e.Job, attempt: e.Attempts, due: time.Now().Add(q.ackWait)}
	return q.held, time.Time{}, nil
}

// pass returns the inner queue's delivery d, or settles it as its promoted copy was and returns
// nil (the caller reads on).
func (q *frontQueue) pass(ctx context.Context, d Delivery) (Delivery, error) {
	id := d.Job().ID
	q.mu.Lock()
	err := q.loadLocked(ctx)
	var e frontEntry
	if p := q.rec.find(id); err == nil && p != nil {
		e = *p
	}
	if err == nil && e.Settled == "" {
		q.busy = &passDelivery{Delivery: d, q: q}
	}
	busy := q.busy
	if err == nil {
		err = q.unblockLocked(ctx, id)
	}
	q.mu.Unlock()
	switch {
	case err != nil:
		return nil, err
	case e.Settled == frontAcked:
		err = d.Ack(ctx)
	case e.Settled == frontDead:
		err = d.DeadLetter(ctx, e.Reason)
	case hasFencedSettles(d):
		return fencedPass{busy}, nil
	default:
		return busy, nil
	}
	if err != nil {
		return nil, err
	}
	return nil, q.forget(ctx, id)
}

func hasFencedSettles(d Delivery) bool {
	_, ok := d.(FencedDelivery)
	return ok
}

// unblockLocked: the inner queue delivered id, so a job in flight before it, other than id,
// was settled: entries waiting for one no longer wait. q.mu is held.
func (q *frontQueue) unblockLocked(ctx context.Context, id string) error {
	if !slices.ContainsFunc(q.rec.Jobs, func(e frontEntry) bool { return e.After != "" && e.After != id }) {
		return nil
	}
	return q.updateLocked(ctx, func(r *frontRecord) bool {
		changed := false
		for i := range r.Jobs {
			if a := r.Jobs[i].After; a != "" && a != id {
				r.Jobs[i].After, changed = "", true
			}
		}
		return changed
	})
}

// forget removes id's entry, and makes the entries that waited for it no longer wait, once its
// message is settled.
func (q *frontQueue) forget(ctx context.Context, id string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	mine := func(e frontEntry) bool { return e.Job.ID == id || e.After == id }
	if !slices.ContainsFunc(q.rec.Jobs, mine) {
		return nil
	}
	return q.updateLocked(ctx, func(r *frontRecord) bool {
		n, changed := len(r.Jobs), false
		r.Jobs = slices.DeleteFunc(r.Jobs, func(e frontEntry) bool { return e.Job.ID == id })
		for i := range r.Jobs {
			if r.Jobs[i].After == id {
				r.Jobs[i].After, changed = "", true
			}
		}
		return changed || len(r.Jobs) != n
	})
}

func (q *frontQueue) Promote(ctx context.Context, job Job) error {
	if job.Tenant != q.t {
		return fmt.Errorf("promote job %s of %s on the queue of %s", job.ID, job.Tenant, q.t)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	after := ""
	if q.busy != nil && q.busy.Job().ID != job.ID {
		after = q.busy.Job().ID
	}
	err := q.updateLocked(ctx, func(r *frontRecord) bool {
		if r.find(job.ID) != nil {
			return false
		}
		r.Jobs = append(r.Jobs, frontEntry{Job: job, At: time.Now(), After: after})
		return true
	})
	if err != nil {
		return fmt.Errorf("promote job %s: %w", job.ID, err)
	}
	return nil
}

// Close closes the inner queue; a front delivery not settled comes first to the next owner.
func (q *frontQueue) Close(ctx context.Context) error { return q.inner.Close(ctx) }

// loadLocked reads the tenant's record once. q.mu is held.
func (q *frontQueue) loadLocked(ctx context.Context) error {
	if q.loaded {
		return nil
	}
	data, ver, err := q.table.Get(ctx, q.key)
	q.rec, q.exists, q.version = frontRecord{}, err == nil, ver
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return fmt.Errorf("read the front of %s: %w", q.t, err)
	default:
		if err := json.Unmarshal(data, &q.rec); err != nil {
			return fmt.Errorf("read the front of %s: %w", q.t, err)
		}
	}
	q.loaded = true
	return nil
}

// updateLocked applies change to a copy of the record and stores it with compare-and-set
// (reading it again after a conflict); change returns false when it changed nothing. Settled
// entries older than JobRetention, whose message never came up, are dropped. q.mu is held.
func (q *frontQueue) updateLocked(ctx context.Context, change func(*frontRecord) bool) error {
	for range 8 {
		if err := q.loadLocked(ctx); err != nil {
			return err
		}
		next := frontRecord{Jobs: slices.Clone(q.rec.Jobs)}
		if !change(&next) {
			return nil
		}
		next.Jobs = slices.DeleteFunc(next.Jobs, func(e frontEntry) bool {
			return e.Settled != "" && time.Since(e.At) > JobRetention
		})
		data, err := json.Marshal(next)
		if err != nil {
			return err
		}
		var ver uint64
		if q.exists {
			ver, err = q.table.Update(ctx, q.key, data, q.version)
		} else {
			ver, err = q.table.Create(ctx, q.key, data)
		}
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrExists) {
			q.loaded = false
			continue
		}
		if err != nil {
			return fmt.Errorf("write the front of %s: %w", q.t, err)
		}
		q.rec, q.exists, q.version = next, true, ver
		return nil
	}
	return fmt.Errorf("write the front of %s: %w", q.t, ErrConflict)
}

// settleFront records how a front delivery was settled.
func (q *frontQueue) settleFront(ctx context.Context, d *frontDelivery, how, reason string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	err := q.updateLocked(ctx, func(r *frontRecord) bool {
		e := r.find(d.job.ID)
		if e == nil || e.Settled != "" {
			return false // settled before (idempotent), or its message came up since
		}
		e.Settled, e.Reason = how, reason
		return true
	})
	if err != nil {
		return err
	}
	if q.held == d {
		q.held = nil
	}
	return nil
}

// frontDelivery is a promoted job delivered from the front.
type frontDelivery struct {
	q       *frontQueue
	job     Job
	attempt int
	due     time.Time // under q.mu
	retried bool      // under q.mu
}

func (d *frontDelivery) Job() Job     { return d.job }
func (d *frontDelivery) Attempt() int { return d.attempt }

// Behind is -1: the front does not count the inner queue's jobs.
func (d *frontDelivery) Behind() int { return -1 }

func (d *frontDelivery) Extend(ctx context.Context) error {
	d.q.mu.Lock()
	defer d.q.mu.Unlock()
	if d.q.held == d && !d.retried {
		d.due = time.Now().Add(d.q.ackWait)
	}
	return ctx.Err()
}

func (d *frontDelivery) Ack(ctx context.Context) error {
	return d.q.settleFront(ctx, d, frontAcked, "")
}

func (d *frontDelivery) Retry(ctx context.Context, delay time.Duration) error {
	d.q.mu.Lock()
	defer d.q.mu.Unlock()
	if d.q.held == d {
		d.due, d.retried = time.Now().Add(max(delay, 0)), true
	}
	return ctx.Err()
}

// DeadLetter records the reason; the job's message is dead-lettered with it when it comes up
// (DeadLetters lists it from then on).
func (d *frontDelivery) DeadLetter(ctx context.Context, reason string) error {
	return d.q.settleFront(ctx, d, frontDead, reason)
}

// passDelivery is the inner queue's delivery; settling it for good frees the front and drops
// the job's entry, if it was promoted meanwhile.
type passDelivery struct {
	Delivery
	q *frontQueue
}

func (d *passDelivery) Ack(ctx context.Context) error {
	if err := d.Delivery.Ack(ctx); err != nil {
		return err
	}
	return d.done(ctx)
}

func (d *passDelivery) DeadLetter(ctx context.Context, reason string) error {
	if err := d.Delivery.DeadLetter(ctx, reason); err != nil {
		return err
	}
	return d.done(ctx)
}

// fencedPass is a passDelivery whose inner delivery's settles can be fenced in the store.
type fencedPass struct{ *passDelivery }

// FencedBy fences the inner delivery's settles.
func (d fencedPass) FencedBy(token uint64) Delivery {
	d.Delivery.(FencedDelivery).FencedBy(token)
	return d
}

func (d *passDelivery) done(ctx context.Context) error {
	d.q.mu.Lock()
	if d.q.busy == d {
		d.q.busy = nil
	}
	d.q.mu.Unlock()
	return d.q.forget(ctx, d.Job().ID)
}
