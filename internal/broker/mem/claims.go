package mem

import (
	"context"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// claims is the shared set of claim requests: one per tenant, handed out oldest since first.
type claims struct{ c *conn }

var _ broker.Claims = (*claims)(nil)

func (cl *claims) Request(ctx context.Context, t tenant.ID, since time.Time) error {
	if err := cl.c.check(ctx); err != nil {
		return err
	}
	cl.c.e.claims.request(t, since)
	return nil
}

func (cl *claims) Next(ctx context.Context) (broker.Claim, error) {
	if err := cl.c.check(ctx); err != nil {
		return nil, err
	}
	for {
		c, until, changed := cl.c.e.claims.take()
		if c != nil {
			c.c = cl.c
			return c, nil
		}
		if err := cl.c.wait(ctx, changed, until); err != nil {
			return nil, err
		}
	}
}

func (cl *claims) Waiting(ctx context.Context) (int, error) {
	if err := cl.c.check(ctx); err != nil {
		return 0, err
	}
	return cl.c.e.claims.waiting(), nil
}

type claim struct {
	c   *conn
	t   tenant.ID
	at  time.Time
	gen uint64
}

func (c *claim) Tenant() tenant.ID      { return c.t }
func (c *claim) RequestedAt() time.Time { return c.at }

func (c *claim) Ack(ctx context.Context) error {
	if err := c.c.check(ctx); err != nil {
		return err
	}
	c.c.e.claims.ack(c.t, c.gen)
	return nil
}

// claimSet holds each tenant's outstanding request. gen changes with every hand-out and
// every request made during one, so an acknowledgement removes only what it was handed.
type claimSet struct {
	mu      sync.Mutex
	ackWait time.Duration
	items   map[tenant.ID]*claimItem
	gen     uint64
	changed notifier
}

type claimItem struct {
	since, at time.Time
	due       time.Time // zero while waiting; else handed out until then
	gen       uint64
}

func newClaimSet(ackWait time.Duration) *claimSet {
	return &claimSet{ackWait: ackWait, items: map[tenant.ID]*claimItem{}}
}

func (it *claimItem) waiting(now time.Time) bool { return it.due.IsZero() || !now.Before(it.due) }

func (s *claimSet) request(t tenant.ID, since time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	it, ok := s.items[t]
	switch {
	case !ok:
		s.items[t] = &claimItem{since: since, at: now}
	case !it.waiting(now): // handed out: waiting again, in its place
		s.gen++
		it.due, it.gen = time.Time{}, s.gen
		fallthrough
	case since.Before(it.since):
		it.since = minTime(it.since, since)
	}
	s.changed.fire()
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// take hands out the waiting request with the oldest since (ties: made first, then tenant);
// if none waits, it returns when the next hand-out runs out (zero: none) and a change channel.
func (s *claimSet) take() (*claim, time.Time, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	var best *claimItem
	var bt tenant.ID
	var until time.Time
	for t, it := range s.items {
		switch {
		case it.waiting(now):
			if best == nil || before(it, t, best, bt) {
				best, bt = it, t
			}
		case until.IsZero() || it.due.Before(until):
			until = it.due
		}
	}
	if best == nil {
		return nil, until, s.changed.wait()
	}
	s.gen++
	best.due, best.gen = now.Add(s.ackWait), s.gen
	return &claim{t: bt, at: best.at, gen: best.gen}, time.Time{}, nil
}

func before(a *claimItem, at tenant.ID, b *claimItem, bt tenant.ID) bool {
	switch {
	case !a.since.Equal(b.since):
		return a.since.Before(b.since)
	case !a.at.Equal(b.at):
		return a.at.Before(b.at)
	}
	return at.String() < bt.String()
}

func (s *claimSet) ack(t tenant.ID, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if it, ok := s.items[t]; ok && it.gen == gen {
		delete(s.items, t)
	}
}

func (s *claimSet) waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now, n := time.Now(), 0
	for _, it := range s.items {
		if it.waiting(now) {
			n++
		}
	}
	return n
}
