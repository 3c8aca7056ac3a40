package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// leases keeps one key per tenant in a KV bucket with per-key TTL, the bucket of the tenant's
// lease shard (see leaseShard). The fencing token is the revision of the acquiring write:
// revisions are the bucket stream's sequence numbers, so they increase strictly across the
// tenants of a shard, and a tenant's lease is always in the same shard. A record is live
// until the ExpiresAt written in it: Acquire takes over one past it (takeExpired) even if the
// engine never removed it. Renewal publishes with expected-last-subject-sequence and a fresh
// per-message TTL (kv.Update would drop the TTL). Expiry is also checked against the
// ExpiresAt written in the value, because the server removes expired keys up to ~250 ms late.
type leases struct {
	shards []leaseShard // by shardIndex(tenant)
	js     jetstream.JetStream
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
func (l *leases) of(t tenant.ID) leaseShard { return l.shards[shardIndex(t, len(l.shards))] }

// leaseBucketNamed is the name of lease shard k's bucket.
func leaseBucketNamed(k int) string {
	if k == 0 {
		return bucketLeases
	}
	return bucketLeases + "_" + strconv.Itoa(k)
}

var _ broker.Leases = (*leases)(nil)

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

func (l *leases) Acquire(ctx context.Context, t tenant.ID, owner string, ttl time.Duration) (broker.Lease, error) {
	if ttl < time.Second {
		return broker.Lease{}, fmt.Errorf("natsjs: lease ttl %s is below the 1s minimum", ttl)
	}
	now := time.Now()
	v := leaseValue{Owner: owner, ClaimedAt: now, ExpiresAt: now.Add(ttl), TTL: ttl}
	data, _ := json.Marshal(v)
	for range maxTakeovers {
		rev, err := l.of(t).kv.Create(ctx, t.Subject(), data, jetstream.KeyTTL(ttl))
		if errors.Is(err, jetstream.ErrKeyExists) || isWrongLastSeq(err) {
			rev, err = l.takeExpired(ctx, t, data, ttl)
		}
		if errors.Is(err, errGone) {
			continue
		}
		if err != nil {
			return broker.Lease{}, err
		}
		return v.lease(t, rev), nil
	}
	return broker.Lease{}, broker.ErrLeaseHeld
}

// maxTakeovers bounds Acquire's tries when the record it found changes under it.
const maxTakeovers = 3

// errGone: the record Acquire found changed or went away before it could take it over.
var errGone = errors.New("natsjs: lease record changed")

// takeExpired takes over t's record when its own expiry time has passed, whatever the engine
// kept: its per-message TTL is the engine's cleanup, not the truth (an engine that crashed
// around an expiry was seen to bring an expired record back and never expire it again, so
// a Create would find the key forever). The takeover is a compare-and-set on the record's
// revision with a fresh TTL; a live record is ErrLeaseHeld, one that changed meanwhile errGone.
func (l *leases) takeExpired(ctx context.Context, t tenant.ID, data []byte, ttl time.Duration) (uint64, error) {
	sh := l.of(t)
	e, err := sh.kv.Get(ctx, t.Subject())
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return 0, errGone
	}
	if err != nil {
		return 0, ctxErr(ctx, fmt.Errorf("natsjs: acquire %s: %w", t, err))
	}
	if _, err := liveLease(t, e); !errors.Is(err, broker.ErrNotFound) {
		return 0, broker.ErrLeaseHeld // live, or unreadable: never taken from under its owner
	}
	ack, err := l.js.Publish(ctx, "$KV."+sh.bucket+"."+t.Subject(), data,
		jetstream.WithExpectLastSequencePerSubject(e.Revision()), jetstream.WithMsgTTL(ttl))
	if isWrongLastSeq(err) {
		return 0, errGone
	}
	if err != nil {
		return 0, ctxErr(ctx, fmt.Errorf("natsjs: acquire %s: %w", t, err))
	}
	return ack.Sequence, nil
}

func (l *leases) Renew(ctx context.Context, old broker.Lease) (broker.Lease, error) {
	now := time.Now()
	if !now.Before(old.ExpiresAt) {
		return broker.Lease{}, broker.ErrLeaseLost
	}
	v := leaseValue{Owner: old.Owner, Token: old.Token, ClaimedAt: old.ClaimedAt, ExpiresAt: now.Add(old.TTL), TTL: old.TTL}
	data, _ := json.Marshal(v)
	ack, err := l.js.Publish(ctx, "$KV."+l.of(old.Tenant).bucket+"."+old.Tenant.Subject(), data,
		jetstream.WithExpectLastSequencePerSubject(old.Version), jetstream.WithMsgTTL(old.TTL))
	if isWrongLastSeq(err) {
		return broker.Lease{}, broker.ErrLeaseLost
	}
	if err != nil {
		return broker.Lease{}, ctxErr(ctx, fmt.Errorf("natsjs: renew %s: %w", old.Tenant, err))
	}
	return v.lease(old.Tenant, ack.Sequence), nil
}

func (l *leases) Release(ctx context.Context, old broker.Lease) error {
	err := l.of(old.Tenant).kv.Delete(ctx, old.Tenant.Subject(), jetstream.LastRevision(old.Version))
	if isWrongLastSeq(err) {
		return broker.ErrLeaseLost
	}
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("natsjs: release %s: %w", old.Tenant, err))
	}
	return nil
}

func (l *leases) Get(ctx context.Context, t tenant.ID) (broker.Lease, error) {
	e, err := l.of(t).kv.Get(ctx, t.Subject())
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return broker.Lease{}, broker.ErrNotFound
	}
	if err != nil {
		return broker.Lease{}, ctxErr(ctx, fmt.Errorf("natsjs: get lease %s: %w", t, err))
	}
	return liveLease(t, e)
}

func liveLease(t tenant.ID, e jetstream.KeyValueEntry) (broker.Lease, error) {
	var v leaseValue
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return broker.Lease{}, fmt.Errorf("natsjs: lease %s: %w", t, err)
	}
	if !time.Now().Before(v.ExpiresAt) {
		return broker.Lease{}, broker.ErrNotFound
	}
	return v.lease(t, e.Revision()), nil
}

func (l *leases) List(ctx context.Context) ([]broker.Lease, error) {
	var out []broker.Lease
	for _, sh := range l.shards {
		keys, err := sh.kv.ListKeys(ctx)
		if err != nil {
			return nil, ctxErr(ctx, fmt.Errorf("natsjs: list leases: %w", err))
		}
		for k := range keys.Keys() {
			t, err := tenant.ParseSubject(k)
			if err != nil {
				continue
			}
			if lease, err := l.Get(ctx, t); err == nil {
				out = append(out, lease)
			}
		}
	}
	return out, ctx.Err()
}

// Expired watches the buckets for TTL markers (reported as purges; a release is a delete).
func (l *leases) Expired(parent context.Context) (<-chan tenant.ID, error) {
	ctx, cancel := context.WithCancel(parent)
	var watchers []jetstream.KeyWatcher
	for _, sh := range l.shards {
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
