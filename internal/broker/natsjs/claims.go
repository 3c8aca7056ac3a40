package natsjs

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// claims is the broker's claim rules (broker.SharedClaims) over the memory KV bucket
// wo_claims, one key per tenant (its subject form), and the store under them.
type claims struct {
	*broker.SharedClaims
	store *claimStore
}

var (
	_ broker.Claims     = (*claims)(nil)
	_ broker.WarmClaims = (*claims)(nil)
)

func newClaims(a *adapter) *claims {
	s := &claimStore{kv: a.claimsKV, js: a.js, log: a.cfg.Logger}
	return &claims{SharedClaims: broker.NewClaims(s, broker.ClaimsConfig{AckWait: a.cfg.ClaimAckWait}), store: s}
}

var errClosed = errors.New("natsjs: backend closed")

// close ends the watch, if one started.
func (c *claims) close() { c.Close(errClosed) }

// claimStore is a broker.ClaimStore on a KV bucket: the KeyValue's Get, Create and Update on
// the key's last revision (a removal is an empty value), and an ordered consumer on the
// bucket's stream for the watch (claimwatch.go).
type claimStore struct {
	kv   jetstream.KeyValue
	js   jetstream.JetStream
	log  *slog.Logger
	seen atomic.Uint64 // the highest revision fed or written, for the watchdog
	// watch is the running watch, once one started.
	watch atomic.Pointer[claimWatch]
	// skip, in tests, drops records from the watch as if it had missed them.
	skip func(broker.ClaimEntry) bool
}

var _ broker.ClaimStore = (*claimStore)(nil)

// Get reads the key through the KeyValue. A removed key is a record with an empty value.
func (s *claimStore) Get(ctx context.Context, t tenant.ID) (broker.ClaimEntry, error) {
	e, err := s.kv.Get(ctx, t.Subject())
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return broker.ClaimEntry{Tenant: t}, nil // never written, or deleted by an operator
	case err != nil:
		return broker.ClaimEntry{}, err
	}
	return broker.ClaimEntry{Tenant: t, Value: removedIfEmpty(e.Value()), Version: e.Revision()}, nil
}

// removedIfEmpty is value, or nil (removed) when it is empty.
func removedIfEmpty(value []byte) []byte {
	if len(value) == 0 {
		return nil
	}
	return value
}

// kvOperation is the header that marks a KeyValue's delete and purge markers.
const kvOperation = "KV-Operation"

func (s *claimStore) Put(ctx context.Context, t tenant.ID, value []byte, version uint64) (uint64, error) {
	var rev uint64
	var err error
	if version == 0 {
		rev, err = s.kv.Create(ctx, t.Subject(), value)
	} else {
		rev, err = s.kv.Update(ctx, t.Subject(), value, version)
	}
	if isWrongLastSeq(err) {
		return 0, broker.ErrConflict
	}
	if err != nil {
		return 0, err
	}
	s.sawRevision(rev)
	return rev, nil
}

// Delete writes an empty value over version rather than a delete marker: KeyValue.Get reports
// a marker as never written, so a write after it would have to find its revision again (a
// failed create and a read), and processes of earlier releases, which read a key that way,
// would fail on it forever.
func (s *claimStore) Delete(ctx context.Context, t tenant.ID, version uint64) error {
	_, err := s.Put(ctx, t, []byte{}, version)
	return err
}

// sawRevision raises seen to rev.
func (s *claimStore) sawRevision(rev uint64) {
	for {
		cur := s.seen.Load()
		if rev <= cur || s.seen.CompareAndSwap(cur, rev) {
			return
		}
	}
}
