package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/tenant"
)

// Claims on bells (NewBelledClaims): an idle Next waits for a bell, reads every record and
// takes the oldest waiting one with the bell, which stays in flight with the claim until its
// Ack spends it; unspent, it rings again after AckWait, when the hand-out has run out too, and
// whoever receives it hands the request out again. A bell with nothing waiting is spent, or
// snoozed until the earliest hand-out runs out. So every outstanding request has a bell,
// surplus bells (rung at least once) cost a List each, and idle workers cost only the wait.

// requestNew, belled, first tries to create t's request outright (the records hold only
// outstanding requests, so most requests are new): done when it did, and rang.
func (c *SharedClaims) requestNew(ctx context.Context, t tenant.ID, since time.Time) (bool, error) {
	if c.bells == nil {
		return false, nil
	}
	now := time.Now()
	_, err := c.store.Put(ctx, t, claimRecord{Since: since, At: now}.encode(), 0)
	if errors.Is(err, ErrConflict) {
		return false, nil // there is one: merge into it
	}
	if err == nil {
		err = c.ring(ctx)
	}
	if err != nil {
		return true, fmt.Errorf("request a claim for %s: %w", t, err)
	}
	return true, nil
}

// ring, belled, rings after a write that made or restated a waiting request.
func (c *SharedClaims) ring(ctx context.Context) error {
	if c.bells == nil {
		return nil
	}
	return c.bells.Ring(ctx)
}

// nextByBell waits for a bell and hands out the oldest waiting request with it.
func (c *SharedClaims) nextByBell(ctx context.Context) (Claim, error) {
	for {
		if err := c.check(ctx); err != nil {
			return nil, err
		}
		bell, err := c.bells.Wait(ctx)
		if err != nil {
			return nil, ctxErr(ctx, err)
		}
		cl, err := c.answer(ctx, bell)
		if err != nil {
			bell.Drop()
			return nil, ctxErr(ctx, fmt.Errorf("next claim: %w", err))
		}
		if cl != nil {
			return cl, nil
		}
	}
}

// listed is a record as List read it.
type listed struct {
	t tenant.ID
	indexEntry
}

// answer takes the oldest waiting request for bell, or parks the bell when none waits.
func (c *SharedClaims) answer(ctx context.Context, bell Bell) (Claim, error) {
	for {
		recs, err := c.list(ctx)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		best, ok := oldestListed(recs, now)
		if !ok {
			return nil, c.park(ctx, bell, recs)
		}
		v := best.v.handOut(c.taker, now.Add(c.cfg.AckWait))
		ver, err := c.store.Put(ctx, best.t, v.encode(), best.ver)
		if errors.Is(err, ErrConflict) {
			continue // a request or another taker wrote first: read again
		}
		if err != nil {
			return nil, err
		}
		c.counted.set(countWaiting(recs, now) - 1) // a pool asks right after taking
		return &sharedClaim{c: c, t: best.t, ver: ver, at: v.At, bell: bell}, nil
	}
}

// list reads the outstanding records.
func (c *SharedClaims) list(ctx context.Context) ([]listed, error) {
	entries, err := c.bells.List(ctx)
	if err != nil {
		return nil, err
	}
	recs := make([]listed, 0, len(entries))
	for _, e := range entries {
		if v := decodeClaim(e.Value); !v.Done {
			recs = append(recs, listed{t: e.Tenant, indexEntry: indexEntry{v: v, ver: e.Version}})
		}
	}
	return recs, nil
}

func oldestListed(recs []listed, now time.Time) (best listed, ok bool) {
	for _, r := range recs {
		if r.v.waiting(now) && (!ok || claimBefore(r.v, r.t, best.v, best.t)) {
			best, ok = r, true
		}
	}
	return best, ok
}

func countWaiting(recs []listed, now time.Time) int {
	n := 0
	for _, r := range recs {
		if r.v.waiting(now) {
			n++
		}
	}
	return n
}

// park spends a bell nothing waits for, or snoozes it until the earliest hand-out runs out
// (then it answers that request should it come back).
func (c *SharedClaims) park(ctx context.Context, bell Bell, recs []listed) error {
	var until time.Time
	for _, r := range recs {
		until = earliest(until, r.v.Until)
	}
	if until.IsZero() {
		return bell.Done(ctx)
	}
	return bell.Snooze(ctx, time.Until(until))
}

// waitingByList counts the waiting requests with a List, reused for WaitingCache: the worker
// pool asks every 50 ms while an owner is idle, and nobody asks while no tenant is owned.
func (c *SharedClaims) waitingByList(ctx context.Context) (int, error) {
	if err := c.check(ctx); err != nil {
		return 0, err
	}
	c.counted.mu.Lock()
	defer c.counted.mu.Unlock()
	if time.Since(c.counted.at) < c.cfg.WaitingCache {
		return c.counted.n, nil
	}
	recs, err := c.list(ctx)
	if err != nil {
		return 0, ctxErr(ctx, fmt.Errorf("waiting claims: %w", err))
	}
	c.counted.n, c.counted.at = countWaiting(recs, time.Now()), time.Now()
	return c.counted.n, nil
}

// waitingCount is the last Waiting answer and when it was read.
type waitingCount struct {
	mu sync.Mutex
	n  int
	at time.Time
}

func (w *waitingCount) set(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n, w.at = max(n, 0), time.Now()
}
