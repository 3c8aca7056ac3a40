package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// leaseStore keeps one key per tenant in a KV bucket with per-key TTL, the bucket of the
// tenant's lease shard (see leaseShard), under the lease rules of broker.NewLeases. The fencing
// token is the revision of the acquiring write: revisions are the bucket stream's sequence
// numbers, so they increase strictly across the tenants of a shard, and a tenant's lease is
// always in the same shard. A record is live until the ExpiresAt written in it: Acquire takes
// over one past it even if the engine never removed it (an engine that crashed around an
// expiry was seen to bring an expired record back and never expire it again, so a create
// would find the key forever). A replacement publishes with expected-last-subject-sequence and
// a fresh per-message TTL (kv.Update would drop the TTL). The server removes expired keys up
// to ~250 ms late; the rules judge expiry by the ExpiresAt written in the value.
type leaseStore struct {
	shards []leaseShard // by shardIndex(tenant)
	js     jetstream.JetStream

	mu sync.Mutex
	// firsts holds, for tenants whose lease key CreateLease found never written (bounded),
	// the revision it created: their first acquisition, whose fence keys are likely never
	// written either (see leases.fence).
	firsts map[string]uint64
}

// leaseShard is one of the leases' buckets: wo_leases, wo_leases_1, … A server stores and
// fsyncs one stream's writes one after another, and a claim costs two synced lease writes
// (create, delete), so one bucket bounded claims per second; a deployment splits its leases
// over as many buckets as its inbox shards, whose fsyncs the file system commits together.
type leaseShard struct {
	kv     jetstream.KeyValue
	bucket string
}

// of is t's lease shard.
func (s *leaseStore) of(t tenant.ID) leaseShard { return s.shards[shardIndex(t, len(s.shards))] }

// leaseBucketNamed is the name of lease shard k's bucket.
func leaseBucketNamed(k int) string {
	if k == 0 {
		return bucketLeases
	}
	return bucketLeases + "_" + strconv.Itoa(k)
}

var _ broker.LeaseStore = (*leaseStore)(nil)

// leases is the lease rules over leaseStore, with the tenant's fence keys raised by every
// acquisition before Acquire returns, so a result or a settle the previous holder makes
// afterwards is refused by the stream it is written to.
type leases struct {
	broker.Leases
	store  *leaseStore
	fences []*fences
}

func newLeases(shards []leaseShard, js jetstream.JetStream, f ...*fences) *leases {
	s := &leaseStore{shards: shards, js: js}
	return &leases{Leases: broker.NewLeases(s, time.Second), store: s, fences: f}
}

// of is t's lease shard.
func (l *leases) of(t tenant.ID) leaseShard { return l.store.of(t) }

type leaseValue struct {
	Owner     string        `json:"owner"`
	Token     uint64        `json:"token,omitempty"`
	ClaimedAt time.Time     `json:"claimedAt"`
	ExpiresAt time.Time     `json:"expiresAt"`
	TTL       time.Duration `json:"ttl"`
}

func (v leaseValue) lease(t tenant.ID, version uint64) broker.Lease {
	token := v.Token
	if token == 0 {
		token = version
	}
	return broker.Lease{Tenant: t, Owner: v.Owner, Token: token, ClaimedAt: v.ClaimedAt,
		ExpiresAt: v.ExpiresAt, TTL: v.TTL, Version: version}
}

func valueOf(l broker.Lease) []byte {
	data, _ := json.Marshal(leaseValue{Owner: l.Owner, Token: l.Token, ClaimedAt: l.ClaimedAt, ExpiresAt: l.ExpiresAt, TTL: l.TTL})
	return data
}

func (l *leases) Acquire(ctx context.Context, t tenant.ID, owner string, ttl time.Duration) (broker.Lease, error) {
	lease, err := l.Leases.Acquire(ctx, t, owner, ttl)
	if err != nil {
		return lease, err
	}
	return l.fence(ctx, lease)
}

// fence raises the fence keys of a lease just acquired, all at once. When it cannot, the
// lease is released (compare-and-delete) and the error returned: a holder that cannot fence
// must not hold.
//
// A tenant's first acquisition (its lease key never written) first tries to write each fence
// key on the condition that it has never been written either, with no read: a key that
// exists fails the condition, and is read and raised as on any other acquisition.
func (l *leases) fence(ctx context.Context, lease broker.Lease) (broker.Lease, error) {
	first := l.store.first(lease.Tenant, lease.Version)
	errs := make([]error, len(l.fences))
	var wg sync.WaitGroup
	for i, f := range l.fences {
		wg.Go(func() { _, errs[i] = f.markNew(ctx, lease.Tenant, lease.Token, first) })
	}
	wg.Wait()
	err := errors.Join(errs...)
	if err == nil {
		return lease, nil
	}
	_ = l.Release(context.WithoutCancel(ctx), lease)
	if errors.Is(err, broker.ErrLeaseLost) { // a newer acquisition raised it already
		return broker.Lease{}, broker.ErrLeaseHeld
	}
	return broker.Lease{}, fmt.Errorf("natsjs: acquire %s: %w", lease.Tenant, err)
}

func (s *leaseStore) ReadLease(ctx context.Context, t tenant.ID) (broker.Lease, error) {
	e, err := s.of(t).kv.Get(ctx, t.Subject())
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return broker.Lease{}, broker.ErrNotFound
	}
	if err != nil {
		return broker.Lease{}, ctxErr(ctx, fmt.Errorf("natsjs: get lease %s: %w", t, err))
	}
	var v leaseValue
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return broker.Lease{}, fmt.Errorf("natsjs: lease %s: %w", t, err)
	}
	return v.lease(t, e.Revision()), nil
}

// CreateLease is the KeyValue's create, written out to tell a key never written (its tenant's
// first acquisition, remembered in firsts) from one written over its delete marker (a release).
func (s *leaseStore) CreateLease(ctx context.Context, l broker.Lease) (uint64, error) {
	rev, err := s.ReplaceLease(ctx, l, 0) // 0: the key has no message
	if err == nil {
		s.mu.Lock()
		putBounded(&s.firsts, l.Tenant.Subject(), rev)
		s.mu.Unlock()
		return rev, nil
	}
	if !errors.Is(err, broker.ErrConflict) {
		return 0, err
	}
	seq, removed, err := s.last(ctx, l.Tenant)
	if err != nil { // no direct get (an older setup turned it off): the KeyValue's own way
		rev, err := s.of(l.Tenant).kv.Create(ctx, l.Tenant.Subject(), valueOf(l), jetstream.KeyTTL(l.TTL))
		if errors.Is(err, jetstream.ErrKeyExists) || isWrongLastSeq(err) {
			return 0, broker.ErrExists
		}
		if err != nil {
			return 0, ctxErr(ctx, fmt.Errorf("natsjs: acquire %s: %w", l.Tenant, err))
		}
		return rev, nil
	}
	if !removed {
		return 0, broker.ErrExists // live or run out: the rules take over one that ran out
	}
	rev, err = s.ReplaceLease(ctx, l, seq)
	if errors.Is(err, broker.ErrConflict) {
		return 0, broker.ErrExists // another acquisition came first
	}
	return rev, err
}

// last reads the last message of t's lease key with a direct get: its sequence (0: none) and
// whether it is a delete or purge marker.
func (s *leaseStore) last(ctx context.Context, t tenant.ID) (seq uint64, removed bool, err error) {
	sh := s.of(t)
	m, err := s.js.Conn().RequestWithContext(ctx, "$JS.API.DIRECT.GET.KV_"+sh.bucket+".$KV."+sh.bucket+"."+t.Subject(), nil)
	if err != nil {
		return 0, false, err
	}
	switch status := m.Header.Get("Status"); status {
	case "":
	case "404":
		return 0, false, nil
	default:
		return 0, false, fmt.Errorf("natsjs: read the lease of %s: %s %s", t, status, m.Header.Get("Description"))
	}
	seq, err = strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	return seq, removedMarker(m.Header), err
}

// removedMarker reports whether a key's message with header h is a delete or purge marker:
// the KeyValue's own, or the server's marker for a key whose TTL ran out (as the KeyValue's
// Get reads them).
func removedMarker(h nats.Header) bool {
	if h.Get(kvOperation) != "" {
		return true
	}
	switch h.Get(jetstream.MarkerReasonHeader) {
	case "MaxAge", "Purge", "Remove":
		return true
	}
	return false
}

// first reports whether rev created t's lease key, never written before, and forgets it.
func (s *leaseStore) first(t tenant.ID, rev uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.firsts[t.Subject()]
	delete(s.firsts, t.Subject())
	return ok && r == rev
}

func (s *leaseStore) ReplaceLease(ctx context.Context, l broker.Lease, version uint64) (uint64, error) {
	ack, err := s.js.Publish(ctx, "$KV."+s.of(l.Tenant).bucket+"."+l.Tenant.Subject(), valueOf(l),
		jetstream.WithExpectLastSequencePerSubject(version), jetstream.WithMsgTTL(l.TTL))
	if isWrongLastSeq(err) {
		return 0, broker.ErrConflict
	}
	if err != nil {
		return 0, ctxErr(ctx, fmt.Errorf("natsjs: write the lease of %s: %w", l.Tenant, err))
	}
	return ack.Sequence, nil
}

func (s *leaseStore) DeleteLease(ctx context.Context, t tenant.ID, version uint64) error {
	err := s.of(t).kv.Delete(ctx, t.Subject(), jetstream.LastRevision(version))
	if isWrongLastSeq(err) {
		return broker.ErrConflict
	}
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("natsjs: release %s: %w", t, err))
	}
	return nil
}

func (s *leaseStore) ListLeases(ctx context.Context) ([]broker.Lease, error) {
	var out []broker.Lease
	for _, sh := range s.shards {
		keys, err := sh.kv.ListKeys(ctx)
		if err != nil {
			return nil, ctxErr(ctx, fmt.Errorf("natsjs: list leases: %w", err))
		}
		for k := range keys.Keys() {
			t, err := tenant.ParseSubject(k)
			if err != nil {
				continue
			}
			if lease, err := s.ReadLease(ctx, t); err == nil {
				out = append(out, lease)
			}
		}
	}
	return out, ctx.Err()
}

// Expired watches the buckets for TTL markers (reported as purges; a release is a delete).
func (s *leaseStore) Expired(parent context.Context) (<-chan tenant.ID, error) {
	ctx, cancel := context.WithCancel(parent)
	var watchers []jetstream.KeyWatcher
	for _, sh := range s.shards {
		w, err := sh.kv.WatchAll(ctx, jetstream.UpdatesOnly())
		if err != nil {
			cancel()
			for _, w := range watchers {
				_ = w.Stop()
			}
			return nil, ctxErr(parent, fmt.Errorf("natsjs: watch leases: %w", err))
		}
		watchers = append(watchers, w)
	}
	out := make(chan tenant.ID, 64)
	var wg sync.WaitGroup
	for _, w := range watchers {
		wg.Go(func() {
			defer cancel() // one watch ending ends them all, as the one watch did
			defer func() { _ = w.Stop() }()
			forwardExpired(ctx, w, out)
		})
	}
	go func() { wg.Wait(); cancel(); close(out) }()
	return out, nil
}

// forwardExpired sends the tenant of each TTL marker w reports to out, until ctx ends or w
// stops.
func forwardExpired(ctx context.Context, w jetstream.KeyWatcher, out chan<- tenant.ID) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil || e.Operation() != jetstream.KeyValuePurge {
				continue
			}
			if t, err := tenant.ParseSubject(e.Key()); err == nil {
				select {
				case out <- t:
				case <-ctx.Done():
					return
				}
			}
		}
	}
}
