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
	s := &claimStore{kv: a.claimsKV, stream: a.claimsStream, js: a.js, log: a.cfg.Logger}
	return &claims{SharedClaims: broker.NewClaims(s, broker.ClaimsConfig{AckWait: a.cfg.ClaimAckWait}), store: s}
}

var errClosed = errors.New("natsjs: backend closed")

// close ends the watch, if one started.
func (c *claims) close() { c.Close(errClosed) }

// claimStore is a broker.ClaimStore on a KV bucket: the stream's last message per key for
// Get, the KeyValue's Create, Update on the key's last revision and Delete with LastRevision,
// and an ordered consumer on the bucket's stream for the watch (claimwatch.go).
type claimStore struct {
	kv     jetstream.KeyValue
	stream jetstream.Stream // the bucket's
	js     jetstream.JetStream
	log    *slog.Logger
	seen   atomic.Uint64 // the highest revision fed or written, for the watchdog
	// watch is the running watch, once one started.
	watch atomic.Pointer[claimWatch]
	// skip, in tests, drops records from the watch as if it had missed them.
	skip func(broker.ClaimEntry) bool
}

var _ broker.ClaimStore = (*claimStore)(nil)

// Get reads the key's last message from the bucket's stream rather than through the
// KeyValue, which reports a removed key as never written: the delete marker's revision is what
// a write after an ack must name, and a create that fails on it would cost two more requests.
func (s *claimStore) Get(ctx context.Context, t tenant.ID) (broker.ClaimEntry, error) {
	m, err := s.stream.GetLastMsgForSubject(ctx, claimsPrefix+t.Subject())
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return broker.ClaimEntry{Tenant: t}, nil
	case err != nil:
		return broker.ClaimEntry{}, err
	}
	e := broker.ClaimEntry{Tenant: t, Version: m.Sequence}
	if m.Header.Get(kvOperation) == "" {
		e.Value = m.Data
	}
	return e, nil
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

func (s *claimStore) Delete(ctx context.Context, t tenant.ID, version uint64) error {
	if version == 0 {
		return nil // no record: nothing to remove (and LastRevision(0) would not check)
	}
	err := s.kv.Delete(ctx, t.Subject(), jetstream.LastRevision(version))
	if isWrongLastSeq(err) {
		return broker.ErrConflict
	}
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
