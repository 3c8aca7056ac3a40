package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/webordinary/webordinary/internal/tenant"
)

// Fence is the writes a lease holder makes, each conditioned on its lease (Temporal's RangeID:
// the store refuses a stale writer). A fenced write is refused with ErrLeaseLost when the
// tenant's stored lease no longer carries the holder's token (it expired, was released or was
// taken by a newer owner), and a fenced job record write also when the record carries a newer
// token than the holder's: every fenced record write stores the writer's token in the record,
// and the store's compare-and-set on the record's revision makes the token check and the write
// one step, so a record a newer owner wrote is never overwritten by an older one.
//
// Each write is conditioned on the lease in the store, in one step with the write, where the
// backend can (the capabilities FencedJobs, FencedResults and FencedDelivery); elsewhere the
// lease is read just before the write, and a lease that ends between that read and the write
// lets one last write through. A store that conditions a write on a fence key its tenant's
// acquisitions raise (natsjs) refuses it once a newer owner acquired the tenant, not when the
// lease merely ran out or was released. What each backend conditions in the store:
//   - UpdateJob: the record's token inside the record's compare-and-set, everywhere; the lease
//     too on mem (one lock) and awsq (a DynamoDB transaction: a condition check on the lease
//     item beside the record's put); natsjs for the records of job ids that end in their
//     tenant's group (JobGroup; every id the router or the mail intake makes): the record and the tenant's
//     fence key share a subject prefix, and one last-sequence condition on that prefix is
//     both the record's compare-and-set and the fence. A record of an id of the older form
//     is read-fenced (ErrUnfenced).
//   - PublishResult: mem (one lock); natsjs (the result is published on the condition that
//     the tenant's fence key in the results stream is still the one the holder's acquisition
//     wrote: Leases.Acquire rewrites it); awsq (a transaction: the lease condition beside a
//     mark of the holder's token on the job's record, and the SQS send only once it
//     committed; SQS has no conditional send, so a lease that runs out between the two lets
//     that send through). Everywhere a holder publishes only the result stored in a final
//     record, which a fenced write made, and the router acts on the result of a final record
//     rather than on a message's copy, so a message makes nothing happen that a fenced write
//     did not store.
//   - Delivery's Ack, Retry and DeadLetter: mem (one lock); awsq (a transaction: the lease
//     condition beside the ledger's update, itself conditioned on the queue's receipt
//     handle); natsjs (each settle first writes the tenant's settle mark in the records'
//     stream on the condition that the tenant's fence key there is still the one the holder's
//     acquisition wrote, and the queue acts on the settle only once the mark is accepted, or
//     the job's result, which the same connection published fenced under the same lease, was:
//     a job leaves the inbox only once the store accepted, under its remover's lease, its
//     removal or its end).
//
// Safe for concurrent use.
type Fence struct {
	b      *Backend
	tenant tenant.ID
	token  uint64
}

// FencedJobs is an optional capability of Jobs: an update conditioned on the tenant's lease in
// the store itself, in one step with the record's compare-and-set.
type FencedJobs interface {
	// UpdateFenced is Update storing fn's record only while t's live lease carries token, as
	// one atomic step with the compare-and-set; ErrLeaseLost otherwise, and nothing stored.
	// A store that cannot fence some records (natsjs: those of job ids of the older form)
	// returns ErrUnfenced for them before calling fn, and Fence then reads the lease before
	// each attempt of a plain Update.
	UpdateFenced(ctx context.Context, id string, t tenant.ID, token uint64, fn func(*JobRecord) error) (JobRecord, error)
}

// ErrUnfenced is FencedJobs.UpdateFenced's answer for a record its store cannot fence.
var ErrUnfenced = errors.New("the store cannot fence this record")

// FencedResults is an optional capability of Results: a publish conditioned on the tenant's
// lease in the store itself.
type FencedResults interface {
	// PublishFenced is Publish, refused with ErrLeaseLost (and nothing published) once a lease
	// of t newer than token's was acquired; a backend may also refuse once token's lease ran
	// out. r is t's.
	PublishFenced(ctx context.Context, t tenant.ID, token uint64, r Result) error
}

// FencedDelivery is an optional capability of Delivery: settles conditioned on the tenant's
// lease in the store itself.
type FencedDelivery interface {
	// FencedBy makes the delivery's later Ack, Retry and DeadLetter refused with ErrLeaseLost
	// (and nothing changed) once a lease of its tenant newer than token's was acquired,
	// checked by the store in one step with the settle; a backend may also refuse once
	// token's lease ran out. An Ack or DeadLetter of a job whose result the same connection
	// published under token (FencedResults) is fenced by that publish already: a backend may
	// accept it without a check of its own. It returns the delivery. Call it before settling.
	FencedBy(token uint64) Delivery
}

// NewFence returns the fenced writes of l's holder on b.
func NewFence(b *Backend, l Lease) *Fence {
	return &Fence{b: b, tenant: l.Tenant, token: l.Token}
}

// Check returns nil while t's stored lease carries the fence's token, ErrLeaseLost when it
// does not (or there is none), and the store's error when it cannot tell. A lease read with
// an older token than the fence's is a stale read (a replica behind the acquire: tokens only
// grow), so it cannot tell either.
func (f *Fence) Check(ctx context.Context) error {
	l, err := f.b.Leases.Get(ctx, f.tenant)
	switch {
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("lease of %s (token %d) is gone: %w", f.tenant, f.token, ErrLeaseLost)
	case err != nil:
		return fmt.Errorf("check the lease of %s: %w", f.tenant, err)
	case l.Token < f.token:
		return fmt.Errorf("lease of %s read as token %d, older than %d: a replica behind; try again", f.tenant, l.Token, f.token)
	case l.Token != f.token || !time.Now().Before(l.ExpiresAt):
		return fmt.Errorf("lease of %s is token %d, not %d: %w", f.tenant, l.Token, f.token, ErrLeaseLost)
	}
	return nil
}

// UpdateJob is Jobs.Update for the lease holder: fn's record is stored only while the lease is
// the holder's and the record carries no newer token; it stores the holder's token in the
// record. A refusal returns ErrLeaseLost and stores nothing.
func (f *Fence) UpdateJob(ctx context.Context, id string, fn func(*JobRecord) error) (JobRecord, error) {
	update := func(readLease bool) func(r *JobRecord) error {
		return func(r *JobRecord) error {
			if r.LeaseToken > f.token {
				return fmt.Errorf("job %s was written under token %d, after %d: %w", id, r.LeaseToken, f.token, ErrLeaseLost)
			}
			if readLease {
				if err := f.Check(ctx); err != nil {
					return err
				}
			}
			if err := fn(r); err != nil {
				return err
			}
			r.LeaseToken = f.token
			return nil
		}
	}
	if fj, ok := f.b.Jobs.(FencedJobs); ok {
		rec, err := fj.UpdateFenced(ctx, id, f.tenant, f.token, update(false))
		if !errors.Is(err, ErrUnfenced) {
			return rec, err
		}
	}
	return f.b.Jobs.Update(ctx, id, update(true))
}

// PublishResult is Results.Publish for the lease holder: refused with ErrLeaseLost once the
// lease is not the holder's.
func (f *Fence) PublishResult(ctx context.Context, r Result) error {
	if fr, ok := f.b.Results.(FencedResults); ok {
		return fr.PublishFenced(ctx, f.tenant, f.token, r)
	}
	if err := f.Check(ctx); err != nil {
		return err
	}
	return f.b.Results.Publish(ctx, r)
}

// Delivery returns d with its settling (Ack, Retry, DeadLetter) refused with ErrLeaseLost once
// the lease is not the holder's. Extend is not fenced: it follows a renewal of the lease.
func (f *Fence) Delivery(d Delivery) Delivery {
	if fd, ok := d.(FencedDelivery); ok {
		return fd.FencedBy(f.token)
	}
	return &fencedDelivery{Delivery: d, f: f}
}

type fencedDelivery struct {
	Delivery
	f *Fence
}

func (d *fencedDelivery) Ack(ctx context.Context) error {
	if err := d.f.Check(ctx); err != nil {
		return err
	}
	return d.Delivery.Ack(ctx)
}

func (d *fencedDelivery) Retry(ctx context.Context, delay time.Duration) error {
	if err := d.f.Check(ctx); err != nil {
		return err
	}
	return d.Delivery.Retry(ctx, delay)
}

func (d *fencedDelivery) DeadLetter(ctx context.Context, reason string) error {
	if err := d.f.Check(ctx); err != nil {
		return err
	}
	return d.Delivery.DeadLetter(ctx, reason)
}
