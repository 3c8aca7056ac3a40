package mem

import (
	"context"
	"sync"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// claimStore is a client's broker.ClaimStore: the engine's claim records, under the claim
// rules of broker.SharedClaims.
type claimStore struct{ c *conn }

var _ broker.ClaimStore = claimStore{}

func (s claimStore) Get(ctx context.Context, t tenant.ID) (broker.ClaimEntry, error) {
	if err := s.c.check(ctx); err != nil {
		return broker.ClaimEntry{}, err
	}
	return s.c.e.claims.get(t), nil
}

func (s claimStore) Put(ctx context.Context, t tenant.ID, value []byte, version uint64) (uint64, error) {
	if err := s.c.check(ctx); err != nil {
		return 0, err
	}
	return s.c.e.claims.write(t, value, version)
}

func (s claimStore) Delete(ctx context.Context, t tenant.ID, version uint64) error {
	if err := s.c.check(ctx); err != nil {
		return err
	}
	_, err := s.c.e.claims.write(t, nil, version)
	return err
}

func (s claimStore) Watch(f broker.ClaimFeed) (func(), error) {
	return s.c.e.claims.watch(f), nil
}

// claimTable holds each tenant's claim record at a version from one counter; a removal stays
// as a nil value at its own version. Every write is fed, under the lock and so in order, to
// the watching clients.
type claimTable struct {
	mu    sync.Mutex
	ver   uint64
	recs  map[tenant.ID]broker.ClaimEntry
	feeds map[*claimWatch]struct{}
}

// claimWatch is one client's watch of the table.
type claimWatch struct{ f broker.ClaimFeed }

func newClaimTable() *claimTable {
	return &claimTable{recs: map[tenant.ID]broker.ClaimEntry{}, feeds: map[*claimWatch]struct{}{}}
}

func (s *claimTable) get(t tenant.ID) broker.ClaimEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recs[t]
}

// write stores value (nil: removes) if t's record is at version.
func (s *claimTable) write(t tenant.ID, value []byte, version uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recs[t].Version != version {
		return 0, broker.ErrConflict
	}
	s.ver++
	e := broker.ClaimEntry{Tenant: t, Value: value, Version: s.ver}
	s.recs[t] = e
	for w := range s.feeds {
		w.f.Apply(e)
	}
	return e.Version, nil
}

// watch feeds f every record, then every write, until the returned stop is called.
func (s *claimTable) watch(f broker.ClaimFeed) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.recs {
		f.Apply(e)
	}
	f.Ready()
	w := &claimWatch{f: f}
	s.feeds[w] = struct{}{}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.feeds, w)
	}
}
