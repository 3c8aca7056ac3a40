package mem

import (
	"context"
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

// leases is the lease store broker.NewLeases runs the lease rules over.
type leases struct{ c *conn }

var _ broker.LeaseStore = (*leases)(nil)

func newLeases(c *conn) broker.Leases { return broker.NewLeases(&leases{c: c}, 0) }

func (l *leases) ReadLease(ctx context.Context, t tenant.ID) (broker.Lease, error) {
	if err := l.c.check(ctx); err != nil {
		return broker.Lease{}, err
	}
	s := l.c.e.leases
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec := s.m[t]; rec != nil {
		return rec.l, nil
	}
	return broker.Lease{}, broker.ErrNotFound
}

// CreateLease stores a new record with a timer at its expiry.
func (l *leases) CreateLease(ctx context.Context, lease broker.Lease) (uint64, error) {
	if err := l.c.check(ctx); err != nil {
		return 0, err
	}
	s := l.c.e.leases
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[lease.Tenant] != nil {
		return 0, broker.ErrExists
	}
	rec := &leaseRec{}
	s.store(rec, lease)
	rec.timer = time.AfterFunc(time.Until(lease.ExpiresAt), func() { s.timerFired(lease.Tenant, rec) })
	s.m[lease.Tenant] = rec
	return rec.l.Version, nil
}

// ReplaceLease renews a live record (its timer re-arms itself when it fires early) or takes
// over one that ran out and whose timer has not run yet (expiring it first, so Expired tells).
func (l *leases) ReplaceLease(ctx context.Context, lease broker.Lease, version uint64) (uint64, error) {
	if err := l.c.check(ctx); err != nil {
		return 0, err
	}
	s := l.c.e.leases
	s.mu.Lock()
	defer s.mu.Unlock()
	t := lease.Tenant
	old := s.m[t]
	switch {
	case old == nil || old.l.Version != version:
		return 0, broker.ErrConflict
	case lease.Token != 0 && s.live(t, time.Now()) == nil:
		return 0, broker.ErrConflict // a renewal never resurrects a lease that ran out
	case lease.Token != 0:
		s.store(old, lease)
		return old.l.Version, nil
	}
	s.expire(t, old)
	rec := &leaseRec{}
	s.store(rec, lease)
	rec.timer = time.AfterFunc(time.Until(lease.ExpiresAt), func() { s.timerFired(t, rec) })
	s.m[t] = rec
	return rec.l.Version, nil
}

// store writes lease to rec at the next revision, its token that revision when it has none.
// Called with s.mu held.
func (s *leaseStore) store(rec *leaseRec, lease broker.Lease) {
	s.rev++
	lease.Version = s.rev
	if lease.Token == 0 {
		lease.Token = s.rev
	}
	rec.l = lease
}

func (l *leases) DeleteLease(ctx context.Context, t tenant.ID, version uint64) error {
	if err := l.c.check(ctx); err != nil {
		return err
	}
	s := l.c.e.leases
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.m[t]
	if rec == nil || rec.l.Version != version {
		return broker.ErrConflict
	}
	rec.timer.Stop()
	delete(s.m, t)
	return nil
}

func (l *leases) ListLeases(ctx context.Context) ([]broker.Lease, error) {
	if err := l.c.check(ctx); err != nil {
		return nil, err
	}
	s := l.c.e.leases
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]broker.Lease, 0, len(s.m))
	for _, rec := range s.m {
		out = append(out, rec.l)
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
