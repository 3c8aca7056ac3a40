package mem

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// leaseStore keeps one record per owned tenant. rev counts every write to any lease: the
// fencing token is the rev of the acquiring write (so tokens increase strictly across all
// tenants and never repeat within an engine) and Version the rev of the latest one. A lease
// is live while now is before its ExpiresAt, exactly; a timer at ExpiresAt removes a lease
// that ran out and tells the Expired subscribers.
type leaseStore struct {
	mu     sync.Mutex
	rev    uint64
	m      map[tenant.ID]*leaseRec
	subs   map[*expirySub]struct{}
	closed bool
}

type leaseRec struct {
	l     broker.Lease
	timer *time.Timer
}

// expirySub is one Expired channel; it is closed (under the store's lock) when its ctx ends or
// its client closes.
type expirySub struct {
	c        *conn
	ch       chan tenant.ID
	stopCtx  func() bool // stops the context.AfterFunc that ends it
	finished bool
}

// expiredBuffer is how many expiries an Expired channel holds for a slow reader; more are
// dropped (the reconciler catches up).
const expiredBuffer = 64

func newLeaseStore() *leaseStore {
	return &leaseStore{m: map[tenant.ID]*leaseRec{}, subs: map[*expirySub]struct{}{}}
}

// live returns t's record if its lease has not run out at now.
func (s *leaseStore) live(t tenant.ID, now time.Time) *leaseRec {
	if rec := s.m[t]; rec != nil && now.Before(rec.l.ExpiresAt) {
		return rec
	}
	return nil
}

// hold locks the store while f's lease is live and carries f's token, so a write made before
// unlock is conditioned on it; ErrLeaseLost (and no lock held) when it is not. Callers take
// this lock before any other store's.
func (s *leaseStore) hold(f *fence, what string) (unlock func(), err error) {
	s.mu.Lock()
	if l := s.live(f.t, time.Now()); l == nil || l.l.Token != f.token {
		s.mu.Unlock()
		return nil, fmt.Errorf("mem: %s: the lease of %s is not token %d: %w", what, f.t, f.token, broker.ErrLeaseLost)
	}
	return s.mu.Unlock, nil
}

type leases struct{ c *conn }

var _ broker.Leases = (*leases)(nil)

func (l *leases) Acquire(ctx context.Context, t tenant.ID, owner string, ttl time.Duration) (broker.Lease, error) {
	if err := l.c.check(ctx); err != nil {
		return broker.Lease{}, err
	}
	if ttl <= 0 {
		return broker.Lease{}, errors.New("mem: lease ttl must be positive")
	}
	s := l.c.e.leases
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.live(t, now) != nil {
		return broker.Lease{}, broker.ErrLeaseHeld
	}
	if old := s.m[t]; old != nil { // ran out, and its timer has not run yet
		s.expire(t, old)
	}
	s.rev++
	rec := &leaseRec{l: broker.Lease{Tenant: t, Owner: owner, Token: s.rev, ClaimedAt: now,
		ExpiresAt: now.Add(ttl), TTL: ttl, Version: s.rev}}
	rec.timer = time.AfterFunc(ttl, func() { s.timerFired(t, rec) })
	s.m[t] = rec
	return rec.l, nil
}

// Renew moves the expiry of the stored lease, if it is still old's acquisition at old's version
// and has not run out. The timer is not moved: when it fires early it re-arms itself.
func (l *leases) Renew(ctx context.Context, old broker.Lease) (broker.Lease, error) {
	if err := l.c.check(ctx); err != nil {
		return broker.Lease{}, err
	}
	s := l.c.e.leases
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	rec := s.live(old.Tenant, now)
	if rec == nil || rec.l.Version != old.Version {
		return broker.Lease{}, broker.ErrLeaseLost
	}
	s.rev++
	rec.l.ExpiresAt, rec.l.Version = now.Add(rec.l.TTL), s.rev
	return rec.l, nil
}

func (l *leases) Release(ctx context.Context, old broker.Lease) error {
	if err := l.c.check(ctx); err != nil {
		return err
	}
	s := l.c.e.leases
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.live(old.Tenant, time.Now())
	if rec == nil || rec.l.Version != old.Version {
		return broker.ErrLeaseLost
	}
	rec.timer.Stop()
	delete(s.m, old.Tenant)
	return nil
}

func (l *leases) Get(ctx context.Context, t tenant.ID) (broker.Lease, error) {
	if err := l.c.check(ctx); err != nil {
		return broker.Lease{}, err
	}
	s := l.c.e.leases
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec := s.live(t, time.Now()); rec != nil {
		return rec.l, nil
	}
	return broker.Lease{}, broker.ErrNotFound
}

func (l *leases) List(ctx context.Context) ([]broker.Lease, error) {
	if err := l.c.check(ctx); err != nil {
		return nil, err
	}
	s := l.c.e.leases
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	var out []broker.Lease
	for t := range s.m {
		if rec := s.live(t, now); rec != nil {
			out = append(out, rec.l)
		}
	}
	return out, nil
}

// Expired delivers each tenant whose lease runs out (not released) from now on, until ctx ends
// or the client closes; then the channel is closed.
func (l *leases) Expired(ctx context.Context) (<-chan tenant.ID, error) {
	if err := l.c.check(ctx); err != nil {
		return nil, err
	}
	s := l.c.e.leases
	sub := &expirySub{c: l.c, ch: make(chan tenant.ID, expiredBuffer)}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Checked under the lock: a client closing now either sees this subscription in dropConn
	// or has closed done already.
	if err := l.c.check(ctx); err != nil {
		return nil, err
	}
	s.subs[sub] = struct{}{}
	sub.stopCtx = context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.unsubscribe(sub)
	})
	return sub.ch, nil
}

// timerFired removes rec if it is still t's lease and has run out; a renewed one re-arms.
func (s *leaseStore) timerFired(t tenant.ID, rec *leaseRec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.m[t] != rec {
		return // released, replaced, or the engine closed
	}
	if left := time.Until(rec.l.ExpiresAt); left > 0 {
		rec.timer.Reset(left)
		return
	}
	s.expire(t, rec)
}

// expire removes a lease that ran out and tells every subscriber, dropping the notice for one
// whose buffer is full. Called with s.mu held.
func (s *leaseStore) expire(t tenant.ID, rec *leaseRec) {
	rec.timer.Stop()
	delete(s.m, t)
	for sub := range s.subs {
		select {
		case sub.ch <- t:
		default:
		}
	}
}

// unsubscribe ends sub. Called with s.mu held; idempotent.
func (s *leaseStore) unsubscribe(sub *expirySub) {
	if sub.finished {
		return
	}
	sub.finished = true
	delete(s.subs, sub)
	close(sub.ch)
}

// dropConn ends c's subscriptions.
func (s *leaseStore) dropConn(c *conn) {
	s.mu.Lock()
	var ended []*expirySub
	for sub := range s.subs {
		if sub.c == c {
			s.unsubscribe(sub)
			ended = append(ended, sub)
		}
	}
	s.mu.Unlock()
	for _, sub := range ended {
		sub.stopCtx() // outside the lock: a running AfterFunc takes it
	}
}

// close stops every timer; the engine's clients are already closed.
func (s *leaseStore) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, rec := range s.m {
		rec.timer.Stop()
	}
}
