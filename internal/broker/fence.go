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
// What each write is conditioned on:
//   - UpdateJob: the record's token inside the compare-and-set (Jobs.Update's revision: natsjs
//     KV Update, a DynamoDB ConditionExpression on the item's version, mem's revision), and
//     the lease: in the same step where the store can (FencedJobs: mem), else read before
//     each compare-and-set attempt (natsjs: leases and records are separate streams; awsq:
//     a transaction would, but DynamoDB emulators without TransactWriteItems could not run it).
//   - PublishResult: the lease, read before the publish (a result is de-duplicated by job id,
//     and the worker publishes only the result of a record a fenced write made final).
//   - Delivery's Ack, Retry and DeadLetter: the lease, read before the settle; awsq's ledger
//     also conditions them on the queue's receipt handle (a stale owner's is not current).
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
	UpdateFenced(ctx context.Context, id string, t tenant.ID, token uint64, fn func(*JobRecord) error) (JobRecord, error)
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
	fj, native := f.b.Jobs.(FencedJobs)
	update := func(r *JobRecord) error {
		if r.LeaseToken > f.token {
			return fmt.Errorf("job %s was written under token %d, after %d: %w", id, r.LeaseToken, f.token, ErrLeaseLost)
		}
		if !native {
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
	if native {
		return fj.UpdateFenced(ctx, id, f.tenant, f.token, update)
	}
	return f.b.Jobs.Update(ctx, id, update)
}

// PublishResult is Results.Publish for the lease holder: refused with ErrLeaseLost once the
// lease is not the holder's.
func (f *Fence) PublishResult(ctx context.Context, r Result) error {
	if err := f.Check(ctx); err != nil {
		return err
	}
	return f.b.Results.Publish(ctx, r)
}

// Delivery returns d with its settling (Ack, Retry, DeadLetter) refused with ErrLeaseLost once
// the lease is not the holder's. Extend is not fenced: it follows a renewal of the lease.
func (f *Fence) Delivery(d Delivery) Delivery { return &fencedDelivery{Delivery: d, f: f} }

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
