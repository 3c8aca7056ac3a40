package mem

import (
	"context"
	"slices"
	"sync"
	"time"
)

// ackQueue is a shared work queue with explicit acknowledgement: the results stream. An item handed out and not acknowledged within ackWait is handed out again.
// Items go out oldest first, an overdue one before anything newer.
type ackQueue[T any] struct {
	mu      sync.Mutex
	ackWait time.Duration
	items   []*ackItem[T]
	dedup   *dedupWindow // nil: every push is queued
	changed notifier
}

type ackItem[T any] struct {
	v          T
	at         time.Time // when it was pushed
	due        time.Time // zero while waiting; else handed out until then
	deliveries int
}

// newAckQueue returns a queue whose pushes are de-duplicated by id within window, unless
// window is zero.
func newAckQueue[T any](ackWait, window time.Duration) *ackQueue[T] {
	q := &ackQueue[T]{ackWait: ackWait}
	if window > 0 {
		q.dedup = newDedupWindow(window)
	}
	return q
}

// push appends v; with de-duplication, an id seen within the window is dropped.
func (q *ackQueue[T]) push(id string, v T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	if q.dedup != nil && !q.dedup.add(id, now) {
		return
	}
	q.items = append(q.items, &ackItem[T]{v: v, at: now})
	q.changed.fire()
}

// next blocks until an item is available and hands it out, or ctx ends or c closes.
func (q *ackQueue[T]) next(ctx context.Context, c *conn) (*ackItem[T], int, error) {
	if err := c.check(ctx); err != nil {
		return nil, 0, err
	}
	for {
		it, n, until, changed := q.take()
		if it != nil {
			return it, n, nil
		}
		if err := c.wait(ctx, changed, until); err != nil {
			return nil, 0, err
		}
	}
}

// take hands out the oldest available item with its delivery count; if there is none, it
// returns when the next handed-out item falls due (zero: none) and a channel closed on a change.
func (q *ackQueue[T]) take() (*ackItem[T], int, time.Time, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	var until time.Time
	for _, it := range q.items {
		if it.due.IsZero() || !now.Before(it.due) {
			it.due = now.Add(q.ackWait)
			it.deliveries++
			return it, it.deliveries, time.Time{}, nil
		}
		if until.IsZero() || it.due.Before(until) {
			until = it.due
		}
	}
	return nil, 0, until, q.changed.wait()
}

// ack removes it, whichever delivery of it is acknowledged. Idempotent.
func (q *ackQueue[T]) ack(it *ackItem[T]) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if i := slices.Index(q.items, it); i >= 0 {
		q.items = slices.Delete(q.items, i, i+1)
	}
}
