package broker

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/webordinary/webordinary/internal/tenant"
)

// The claim rules, written once over a claim store. Each tenant has one record: its
// outstanding request (since, when made, who holds it handed out and until when) or done, and
// the process that holds its workspace warm. Every write is conditioned on the version its
// writer read, so a request and a hand-out never overwrite each other: the loser reads again
// and merges with what the winner wrote.
//
// Watched (NewClaims), each SharedClaims (a process's connection) watches the store into an
// index and hands out the waiting request with the oldest since by a conditional write: one
// dispatcher per process, whatever the number of workers, and Waiting is read from the index
// without a round trip. The index only chooses what to try, so one that lags the store costs a
// failed write, never a wrong hand-out; and a repeated request rewrites its record now and
// then (Restate), so an index that missed a write learns of it from the router's next repeat.
// Belled (NewBelledClaims, claimbells.go), an idle Next is woken by a bell instead.

// Defaults of ClaimsConfig.
const (
	DefaultClaimAckWait = 5 * time.Second
	DefaultClaimRestate = time.Second
)

// ClaimsConfig tunes NewClaims and NewBelledClaims.
type ClaimsConfig struct {
	// AckWait is the hand-out time: a claim not acknowledged within it is waiting again, in
	// its place. Default DefaultClaimAckWait.
	AckWait time.Duration
	// Restate is how often, at most, repeated requests for a waiting tenant rewrite its record
	// though nothing about it changed, so a watch that missed it gets it again (belled: rings
	// again, so a bell lost between the write and the ring is made good). Default
	// DefaultClaimRestate; belled, AckWait.
	Restate time.Duration
	// WaitingCache, belled, is how long a Waiting answer (a List) is reused. Default 1s.
	WaitingCache time.Duration
}

// SharedClaims implements Claims and WarmClaims over a backend's claim store (ClaimStore or
// ClaimBells). Safe for concurrent use.
type SharedClaims struct {
	store   ClaimRecords
	watched ClaimStore // nil when belled
	bells   ClaimBells // nil when watched
	cfg     ClaimsConfig
	taker   string // this connection, in handed-out records and warm preferences

	once  sync.Once
	idx   *claimIndex
	stop  func()
	err   error
	ready atomic.Pointer[claimIndex] // idx once it holds the store's records

	closeOnce sync.Once
	closed    chan struct{}
	cause     error

	counted waitingCount // belled: the last List's count
}

var (
	_ Claims     = (*SharedClaims)(nil)
	_ WarmClaims = (*SharedClaims)(nil)
)

// NewClaims returns the claims of one connection to store. Its watch starts with the first
// Next or Waiting (a process that only requests claims, a router, watches nothing).
func NewClaims(store ClaimStore, cfg ClaimsConfig) *SharedClaims {
	cfg.AckWait = cmp.Or(cfg.AckWait, DefaultClaimAckWait)
	cfg.Restate = cmp.Or(cfg.Restate, DefaultClaimRestate)
	return &SharedClaims{store: store, watched: store, cfg: cfg, taker: rand.Text()[:12], closed: make(chan struct{})}
}

// NewBelledClaims returns the claims of one connection to store, woken by its bells (see
// ClaimBells). Warm does nothing on them: a bell goes to any idle Next, so a backend on bells
// does not offer WarmClaims.
func NewBelledClaims(store ClaimBells, cfg ClaimsConfig) *SharedClaims {
	cfg.AckWait = cmp.Or(cfg.AckWait, DefaultClaimAckWait)
	cfg.Restate = cmp.Or(cfg.Restate, cfg.AckWait)
	cfg.WaitingCache = cmp.Or(cfg.WaitingCache, time.Second)
	return &SharedClaims{store: store, bells: store, cfg: cfg, taker: rand.Text()[:12], closed: make(chan struct{})}
}

// Records is the store under these claims (its own contracts are tested through it).
func (c *SharedClaims) Records() ClaimRecords { return c.store }

// Close ends the watch; every call then returns cause, and blocked ones return it at once.
// What this connection handed out and did not acknowledge is waiting again after AckWait.
// Idempotent.
func (c *SharedClaims) Close(cause error) {
	c.closeOnce.Do(func() {
		c.cause = cause
		close(c.closed)
	})
	c.once.Do(func() { c.err = c.cause })
	if c.stop != nil {
		c.stop()
	}
}

// check is the start of every call: a done ctx returns ctx.Err() unwrapped, a closed
// connection its cause.
func (c *SharedClaims) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-c.closed:
		return c.cause
	default:
		return nil
	}
}

// Request merges a request into t's record (see Claims.Request).
func (c *SharedClaims) Request(ctx context.Context, t tenant.ID, since time.Time) error {
	if err := c.check(ctx); err != nil {
		return err
	}
	done, err := c.requestNew(ctx, t, since)
	if done || err != nil {
		return ctxErr(ctx, err)
	}
	for cached := true; ; cached = false {
		cur, fromIndex, err := c.read(ctx, t, cached)
		if err != nil {
			return ctxErr(ctx, fmt.Errorf("request a claim for %s: %w", t, err))
		}
		next, write := cur.v.merged(cur.ver != 0, since, time.Now(), c.cfg.Restate)
		if !write && fromIndex {
			continue // nothing to write, as far as this process knows: make sure
		}
		if !write {
			return nil
		}
		err = c.write(ctx, t, next, cur.ver)
		if errors.Is(err, ErrConflict) {
			continue // a concurrent request or hand-out: merge with what it wrote
		}
		if err == nil {
			err = c.ring(ctx)
		}
		if err != nil {
			return ctxErr(ctx, fmt.Errorf("request a claim for %s: %w", t, err))
		}
		return nil
	}
}

// Warm records this connection as t's preferred taker until until. A request handed out
// right now is left alone (the hand-out ends the preference anyway).
func (c *SharedClaims) Warm(ctx context.Context, t tenant.ID, until time.Time) error {
	if err := c.check(ctx); err != nil || c.bells != nil {
		return err
	}
	for cached := true; ; cached = false {
		cur, fromIndex, err := c.read(ctx, t, cached)
		if err != nil {
			return ctxErr(ctx, fmt.Errorf("warm claim %s: %w", t, err))
		}
		if cur.v.handedOut(time.Now()) {
			if fromIndex {
				continue
			}
			return nil
		}
		v := cur.v
		v.Warm, v.WarmUntil = c.taker, until
		err = c.write(ctx, t, v, cur.ver)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return ctxErr(ctx, fmt.Errorf("warm claim %s: %w", t, err))
		}
		return nil
	}
}

// read is t's record and version: with cached, as this process's index holds it when it has
// one (fromIndex; no round trip, and a write over it is still conditional, so a stale one
// fails and the caller reads again without), otherwise from the store.
func (c *SharedClaims) read(ctx context.Context, t tenant.ID, cached bool) (e indexEntry, fromIndex bool, err error) {
	if idx := c.ready.Load(); cached && idx != nil {
		if e, ok := idx.lookup(t); ok {
			return e, true, nil
		}
	}
	got, err := c.store.Get(ctx, t)
	if err != nil {
		return indexEntry{}, false, err
	}
	return indexEntry{v: decodeClaim(got.Value), ver: got.Version}, false, nil
}

// write stores v over version ver and shows it in the index at once.
func (c *SharedClaims) write(ctx context.Context, t tenant.ID, v claimRecord, ver uint64) error {
	ver, err := c.store.Put(ctx, t, v.encode(), ver)
	if err != nil {
		return err
	}
	if idx := c.ready.Load(); idx != nil {
		idx.set(t, indexEntry{v: v, ver: ver})
	}
	return nil
}

// Next hands out the waiting request with the oldest since (see Claims.Next).
func (c *SharedClaims) Next(ctx context.Context) (Claim, error) {
	if c.bells != nil {
		return c.nextByBell(ctx)
	}
	idx, err := c.index(ctx)
	if err != nil {
		return nil, err
	}
	for {
		changed := idx.changes()
		t, e, ok, wake := idx.oldest(c.taker, time.Now())
		if ok {
			cl, err := c.take(ctx, idx, t, e)
			if cl != nil || err != nil {
				return cl, err
			}
			continue
		}
		if err := c.wait(ctx, changed, wake); err != nil {
			return nil, err
		}
	}
}

// take hands t's request out to this connection. It returns nil, nil when another taker or
// a request got there first (the watch will bring what they wrote).
func (c *SharedClaims) take(ctx context.Context, idx *claimIndex, t tenant.ID, e indexEntry) (Claim, error) {
	defer idx.taken(t)
	v := e.v.handOut(c.taker, time.Now().Add(c.cfg.AckWait))
	ver, err := c.store.Put(ctx, t, v.encode(), e.ver)
	if errors.Is(err, ErrConflict) {
		idx.forget(t, e.ver)
		return nil, nil
	}
	if err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("next claim: %w", err))
	}
	idx.set(t, indexEntry{v: v, ver: ver})
	return &sharedClaim{c: c, t: t, ver: ver, at: v.At}, nil
}

// wait blocks until changed is closed, wake passes (zero: no limit), ctx ends or c closes.
func (c *SharedClaims) wait(ctx context.Context, changed <-chan struct{}, wake time.Time) error {
	var timer <-chan time.Time
	if !wake.IsZero() {
		t := time.NewTimer(time.Until(wake))
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.closed:
		return c.cause
	case <-changed:
	case <-timer:
	}
	return nil
}

// Waiting is read from the index: no round trip once the watch has started (belled: a List,
// reused for WaitingCache).
func (c *SharedClaims) Waiting(ctx context.Context) (int, error) {
	if c.bells != nil {
		return c.waitingByList(ctx)
	}
	idx, err := c.index(ctx)
	if err != nil {
		return 0, err
	}
	return idx.waiting(c.taker, time.Now()), nil
}

// index starts the watch on first use and waits until it holds the store's records.
func (c *SharedClaims) index(ctx context.Context) (*claimIndex, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	c.once.Do(func() {
		c.idx = newClaimIndex()
		c.stop, c.err = c.watched.Watch(c.idx)
		if c.err != nil {
			c.err = fmt.Errorf("watch claims: %w", c.err)
		}
	})
	if c.err != nil {
		return nil, c.err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.closed:
		return nil, c.cause
	case <-c.idx.ready:
		c.ready.Store(c.idx)
		return c.idx, nil
	}
}

// sharedClaim is one handed-out request: the version its hand-out wrote, and (belled) the
// bell that brought it.
type sharedClaim struct {
	c    *SharedClaims
	t    tenant.ID
	ver  uint64
	at   time.Time
	bell Bell
}

func (c *sharedClaim) Tenant() tenant.ID      { return c.t }
func (c *sharedClaim) RequestedAt() time.Time { return c.at }

// Ack removes the request unless it was requested again after the hand-out (then the version
// differs, and the new request stays waiting).
func (c *sharedClaim) Ack(ctx context.Context) error {
	if err := c.c.check(ctx); err != nil {
		return err
	}
	err := c.c.store.Delete(ctx, c.t, c.ver)
	if (err == nil || errors.Is(err, ErrConflict)) && c.bell != nil {
		err = c.bell.Done(ctx)
	}
	if err != nil && !errors.Is(err, ErrConflict) {
		return ctxErr(ctx, fmt.Errorf("ack the claim for %s: %w", c.t, err))
	}
	return nil
}

// ctxErr returns ctx.Err() unwrapped in place of an error when ctx ended, else err.
func ctxErr(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
