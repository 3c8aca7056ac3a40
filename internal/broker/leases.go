package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/webordinary/webordinary/internal/tenant"
)

// LeaseStore is the storage a backend gives NewLeases, the lease rules written once: one
// record per tenant whose version increases strictly with every write of that tenant's record
// (natsjs: the sequence of the tenant's lease bucket, which other tenants share).
// The fencing token of an acquisition is the version of its write: a lease stored with Token 0
// reads back with its version as its token, and a renewal stores its token as it is.
// A store may keep a record's version across its renewals (awsq: the version is the token)
// when its replacement of a lease that ran out is also conditioned on the lease still having
// run out, so a renewal landing between a takeover's read and its write is not overwritten.
type LeaseStore interface {
	// ReadLease returns t's stored lease, live or not, with its Version; ErrNotFound when t has
	// none.
	ReadLease(ctx context.Context, t tenant.ID) (Lease, error)
	// CreateLease stores l as l.Tenant's lease when it has none (ErrExists otherwise); the
	// store may drop it once l.ExpiresAt passes. It returns the write's version.
	CreateLease(ctx context.Context, l Lease) (uint64, error)
	// ReplaceLease stores l over l.Tenant's lease if that is still at version (ErrConflict
	// when it changed or is gone), and returns the write's version. A renewal (l.Token set)
	// of a lease that ran out is refused with ErrConflict where the store can tell.
	ReplaceLease(ctx context.Context, l Lease, version uint64) (uint64, error)
	// DeleteLease removes t's lease if it is still at version; ErrConflict otherwise.
	DeleteLease(ctx context.Context, t tenant.ID, version uint64) error
	// ListLeases returns every stored lease, live or not.
	ListLeases(ctx context.Context) ([]Lease, error)
	// Expired is Leases.Expired.
	Expired(ctx context.Context) (<-chan tenant.ID, error)
}

// SkewedLeaseStore is a LeaseStore whose leases are judged by the clocks of many processes
// (its conditions cannot read a clock of its own). Its holder stops at ExpiresAt, as
// everywhere; others count a lease live until ClockSkew past it.
type SkewedLeaseStore interface {
	LeaseStore
	// ClockSkew is the allowance for clock differences between processes; not negative.
	ClockSkew() time.Duration
}

// NewLeases returns Leases over s; an acquisition's ttl must be positive and at least minTTL.
// A lease is live until its ExpiresAt, whatever the store kept (for others, until its
// ClockSkew past it when s is a SkewedLeaseStore).
func NewLeases(s LeaseStore, minTTL time.Duration) Leases {
	r := &leaseRules{s: s, minTTL: minTTL}
	if sk, ok := s.(SkewedLeaseStore); ok {
		r.skew = sk.ClockSkew()
	}
	return r
}

type leaseRules struct {
	s      LeaseStore
	minTTL time.Duration
	skew   time.Duration // others' allowance past ExpiresAt (SkewedLeaseStore)
}

// maxTakeovers bounds Acquire's tries when the record it found changes under it.
const maxTakeovers = 3

// Acquire creates t's lease, or takes over one that ran out (a compare-and-set on its
// version, so a later version: tokens still increase).
func (r *leaseRules) Acquire(ctx context.Context, t tenant.ID, owner string, ttl time.Duration) (Lease, error) {
	if ttl <= 0 || ttl < r.minTTL {
		return Lease{}, fmt.Errorf("lease ttl %s is below the minimum %s", ttl, max(r.minTTL, time.Nanosecond))
	}
	for range maxTakeovers {
		now := time.Now()
		l := Lease{Tenant: t, Owner: owner, ClaimedAt: now, ExpiresAt: now.Add(ttl), TTL: ttl}
		v, err := r.s.CreateLease(ctx, l)
		if errors.Is(err, ErrExists) {
			v, err = r.takeOver(ctx, l)
		}
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return Lease{}, err
		}
		l.Token, l.Version = v, v
		return l, nil
	}
	return Lease{}, ErrLeaseHeld
}

// takeOver replaces t's stored lease with l if it ran out; ErrLeaseHeld while it is live,
// ErrConflict when it changed or went away meanwhile.
func (r *leaseRules) takeOver(ctx context.Context, l Lease) (uint64, error) {
	cur, err := r.s.ReadLease(ctx, l.Tenant)
	if errors.Is(err, ErrNotFound) {
		return 0, ErrConflict
	}
	if err != nil {
		return 0, err
	}
	if r.held(cur) {
		return 0, ErrLeaseHeld
	}
	return r.s.ReplaceLease(ctx, l, cur.Version)
}

// live reports whether l's holder may still act on it.
func live(l Lease) bool { return time.Now().Before(l.ExpiresAt) }

// held reports whether others must still respect l: until the skew allowance past its expiry.
func (r *leaseRules) held(l Lease) bool { return time.Now().Add(-r.skew).Before(l.ExpiresAt) }

// Renew refuses once l's own expiry passed, then extends it on its version.
func (r *leaseRules) Renew(ctx context.Context, l Lease) (Lease, error) {
	now := time.Now()
	if !now.Before(l.ExpiresAt) {
		return Lease{}, ErrLeaseLost
	}
	l.ExpiresAt = now.Add(l.TTL)
	v, err := r.s.ReplaceLease(ctx, l, l.Version)
	if errors.Is(err, ErrConflict) {
		return Lease{}, ErrLeaseLost
	}
	if err != nil {
		return Lease{}, err
	}
	l.Version = v
	return l, nil
}

// Release deletes l on its version; a lease that ran out is not l's to release.
func (r *leaseRules) Release(ctx context.Context, l Lease) error {
	if !live(l) {
		return ErrLeaseLost
	}
	err := r.s.DeleteLease(ctx, l.Tenant, l.Version)
	if errors.Is(err, ErrConflict) {
		return ErrLeaseLost
	}
	return err
}

func (r *leaseRules) Get(ctx context.Context, t tenant.ID) (Lease, error) {
	l, err := r.s.ReadLease(ctx, t)
	if err == nil && !r.held(l) {
		return Lease{}, ErrNotFound
	}
	return l, err
}

func (r *leaseRules) List(ctx context.Context) ([]Lease, error) {
	all, err := r.s.ListLeases(ctx)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, l := range all {
		if r.held(l) {
			out = append(out, l)
		}
	}
	return out, nil
}

func (r *leaseRules) Expired(ctx context.Context) (<-chan tenant.ID, error) {
	return r.s.Expired(ctx)
}
