package natsjs

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// claims keeps one record per tenant in a memory KV bucket: the tenant's outstanding request
// (since, when made, who holds it handed out and until when) or "done". Every write is a
// compare-and-set on the key's revision, so a request and a hand-out never overwrite each
// other. Each backend instance (a process's connection) watches the bucket into an index and
// hands out the waiting request with the oldest since: one dispatcher per process, whatever
// the number of workers, and Waiting is read from the index without a round trip.
type claims struct {
	a     *adapter
	kv    jetstream.KeyValue
	taker string // this instance, in handed-out records

	once  sync.Once
	idx   *claimIndex
	watch *claimWatch
	err   error
	ready atomic.Pointer[claimIndex] // idx once it holds the bucket's records
}

var (
	_ broker.Claims     = (*claims)(nil)
	_ broker.WarmClaims = (*claims)(nil)
)

func newClaims(a *adapter) *claims {
	return &claims{a: a, kv: a.claimsKV, taker: rand.Text()[:12]}
}

// claimValue is a tenant's claim record.
type claimValue struct {
	Since time.Time `json:"since"`
	At    time.Time `json:"at"`
	Taker string    `json:"taker,omitempty"`
	Until time.Time `json:"until,omitzero"`
	Done  bool      `json:"done,omitempty"`
	// Warm is the taker that holds the tenant's workspace warm, preferred until WarmUntil.
	Warm      string    `json:"warm,omitempty"`
	WarmUntil time.Time `json:"warmUntil,omitzero"`
	// Asked is when a request last restated it: a repeat writes a new revision (at most
	// once per reaskEvery), so a watch that missed the record gets it again.
	Asked time.Time `json:"asked,omitzero"`
}

// reaskEvery bounds how often repeated requests for a waiting tenant rewrite its record.
const reaskEvery = time.Second

// excludes reports whether v's warm preference keeps taker from it at now.
func (v claimValue) excludes(taker string, now time.Time) bool {
	return v.Warm != "" && v.Warm != taker && now.Before(v.WarmUntil)
}

// waiting: outstanding and not handed out (or handed out to a taker whose ack wait passed).
func (v claimValue) waiting(now time.Time) bool {
	return !v.Done && (v.Taker == "" || !now.Before(v.Until))
}

// merged returns the record after a request with since, and whether it must be written.
func (v claimValue) merged(exists bool, since, now time.Time) (claimValue, bool) {
	switch {
	case !exists || v.Done:
		return claimValue{Since: since, At: now, Warm: v.Warm, WarmUntil: v.WarmUntil}, true
	case v.Taker != "" && now.Before(v.Until):
		// Handed out and being decided: make it waiting again, in its place, so the request
		// survives a taker that drops the claim (its ack will not match this revision).
		return claimValue{Since: minTime(v.Since, since), At: v.At}, true
	case since.Before(v.Since):
		v.Since, v.Asked = since, now
		return v, true
	case now.Sub(latest(v.At, v.Asked)) >= reaskEvery:
		v.Asked = now // same place in line, new revision
		return v, true
	}
	return v, false
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func (c *claims) Request(ctx context.Context, t tenant.ID, since time.Time) error {
	for cached := true; ; cached = false {
		cur, rev, err := c.read(ctx, t.Subject(), cached)
		if err != nil {
			return ctxErr(ctx, fmt.Errorf("natsjs: request claim %s: %w", t, err))
		}
		next, write := cur.merged(rev != 0, since, time.Now())
		if !write && cached {
			continue // nothing to write, as far as this process knows: make sure
		}
		if !write {
			return nil
		}
		err = c.put(ctx, t.Subject(), next, rev)
		if isWrongLastSeq(err) {
			continue // a concurrent request or hand-out: merge with what it wrote
		}
		if err != nil {
			return ctxErr(ctx, fmt.Errorf("natsjs: request claim %s: %w", t, err))
		}
		return nil
	}
}

// Warm records this instance as t's preferred taker until until. A request handed out right
// now is left alone (the hand-out ends the preference anyway).
func (c *claims) Warm(ctx context.Context, t tenant.ID, until time.Time) error {
	for cached := true; ; cached = false {
		cur, rev, err := c.read(ctx, t.Subject(), cached)
		if err != nil {
			return ctxErr(ctx, fmt.Errorf("natsjs: warm claim %s: %w", t, err))
		}
		if rev != 0 && !cur.Done && !cur.waiting(time.Now()) {
			if cached {
				continue
			}
			return nil
		}
		if rev == 0 {
			cur = claimValue{Done: true}
		}
		cur.Warm, cur.WarmUntil = c.taker, until
		err = c.put(ctx, t.Subject(), cur, rev)
		if isWrongLastSeq(err) {
			continue
		}
		if err != nil {
			return ctxErr(ctx, fmt.Errorf("natsjs: warm claim %s: %w", t, err))
		}
		return nil
	}
}

// read is key's record and revision: with cached, as this process's index holds it when it
// has one (no round trip; a write over it is still a compare-and-set, so a stale one fails
// and the caller reads again without), otherwise from the bucket.
func (c *claims) read(ctx context.Context, key string, cached bool) (claimValue, uint64, error) {
	if idx := c.ready.Load(); cached && idx != nil {
		if e, ok := idx.lookup(key); ok {
			return e.v, e.rev, nil
		}
	}
	return c.get(ctx, key)
}

// get returns key's record and revision; revision 0 when there is none.
func (c *claims) get(ctx context.Context, key string) (claimValue, uint64, error) {
	var v claimValue
	e, err := c.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return v, 0, nil
	}
	if errors.Is(err, jetstream.ErrKeyDeleted) {
		return claimValue{Done: true}, e.Revision(), nil
	}
	if err != nil {
		return v, 0, err
	}
	if json.Unmarshal(e.Value(), &v) != nil {
		v = claimValue{Done: true} // unreadable: treat as no request, and overwrite it
	}
	return v, e.Revision(), nil
}

// put writes v over revision rev (0: the key must not exist).
func (c *claims) put(ctx context.Context, key string, v claimValue, rev uint64) error {
	data, _ := json.Marshal(v)
	_, err := c.kv.Update(ctx, key, data, rev)
	return err
}

func (c *claims) Next(ctx context.Context) (broker.Claim, error) {
	idx, err := c.index(ctx)
	if err != nil {
		return nil, err
	}
	for {
		changed := idx.changes()
		key, e, wake := idx.oldest(c.taker, time.Now())
		if key != "" {
			cl, err := c.take(ctx, idx, key, e)
			if cl != nil || err != nil {
				return cl, err
			}
			continue
		}
		if err := waitChange(ctx, changed, wake); err != nil {
			return nil, err
		}
	}
}

// take hands the request of key out to this instance. It returns nil, nil when another
// taker or a request got there first (the index will show what they wrote).
func (c *claims) take(ctx context.Context, idx *claimIndex, key string, e claimEntry) (broker.Claim, error) {
	defer idx.taken(key)
	t, err := tenant.ParseSubject(key)
	if err != nil {
		idx.forget(key, e.rev)
		return nil, nil
	}
	v := e.v
	v.Taker, v.Until = c.taker, time.Now().Add(c.a.cfg.ClaimAckWait)
	v.Warm, v.WarmUntil = "", time.Time{}
	data, _ := json.Marshal(v)
	rev, err := c.kv.Update(ctx, key, data, e.rev)
	if isWrongLastSeq(err) {
		idx.forget(key, e.rev)
		return nil, nil
	}
	if err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("natsjs: next claim: %w", err))
	}
	idx.set(key, claimEntry{v: v, rev: rev})
	return &claim{c: c, t: t, key: key, rev: rev, at: v.At}, nil
}

func waitChange(ctx context.Context, changed <-chan struct{}, wake time.Time) error {
	var timer <-chan time.Time
	if !wake.IsZero() {
		t := time.NewTimer(time.Until(wake))
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	case <-timer:
	}
	return nil
}

// Waiting is read from the index: no round trip once the watch has started.
func (c *claims) Waiting(ctx context.Context) (int, error) {
	idx, err := c.index(ctx)
	if err != nil {
		return 0, err
	}
	return idx.waiting(c.taker, time.Now()), nil
}

var errClosed = errors.New("backend closed")

// close ends the watch, if one started.
func (c *claims) close() {
	c.once.Do(func() { c.err = errClosed })
	if c.watch != nil {
		c.watch.stop()
	}
}

// index starts the watch on first use and waits until it holds the bucket's current records.
func (c *claims) index(ctx context.Context) (*claimIndex, error) {
	c.once.Do(func() { c.idx, c.watch, c.err = watchClaims(c.a.js, c.a.cfg.Logger) })
	if c.err != nil {
		return nil, fmt.Errorf("natsjs: watch claims: %w", c.err)
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.idx.ready:
		c.ready.Store(c.idx)
		return c.idx, nil
	}
}

type claim struct {
	c   *claims
	t   tenant.ID
	key string
	rev uint64
	at  time.Time
}

func (c *claim) Tenant() tenant.ID      { return c.t }
func (c *claim) RequestedAt() time.Time { return c.at }

// Ack marks the request done unless it was requested again after the hand-out (then the
// revision differs, and the new request stays waiting).
func (c *claim) Ack(ctx context.Context) error {
	err := c.c.put(ctx, c.key, claimValue{Done: true}, c.rev)
	if err != nil && !isWrongLastSeq(err) {
		return ctxErr(ctx, fmt.Errorf("natsjs: ack claim %s: %w", c.t, err))
	}
	return nil
}
