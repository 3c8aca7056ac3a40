package mem

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// queue is one Open of a tenant queue. It goes stale when closed or when a later Open
// replaces its consumer.
type queue struct {
	c    *conn
	t    tenant.ID
	tq   *tenantQueue
	cons *consumer
}

var _ broker.Queue = (*queue)(nil)

func (q *queue) Next(ctx context.Context, wait time.Duration) (broker.Delivery, error) {
	if err := q.c.check(ctx); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		d, until, changed, err := q.take()
		if err != nil {
			return nil, err
		}
		if d != nil {
			return d, d.decode()
		}
		if !time.Now().Before(deadline) {
			return nil, broker.ErrNoMessage
		}
		if until.IsZero() || until.After(deadline) {
			until = deadline
		}
		if err := q.c.wait(ctx, changed, until); err != nil {
			return nil, err
		}
	}
}

// take delivers msgs[0] if it is available now. Otherwise it returns when it may become
// available (zero: only after a change) and a channel closed on the next change.
func (q *queue) take() (*delivery, time.Time, <-chan struct{}, error) {
	s := q.c.e.inbox
	s.mu.Lock()
	defer s.mu.Unlock()
	if q.tq.consumer != q.cons {
		return nil, time.Time{}, nil, fmt.Errorf("mem: next job for %s: the queue was closed or opened again", q.t)
	}
	c, now := q.cons, time.Now()
	switch {
	case c.cur != nil && now.Before(c.due):
		return nil, c.due, q.tq.changed.wait(), nil // one delivery at a time
	case len(q.tq.msgs) == 0:
		return nil, time.Time{}, q.tq.changed.wait(), nil
	case now.Before(c.hold):
		return nil, c.hold, q.tq.changed.wait(), nil // retried with a delay
	}
	return q.deliver(now), time.Time{}, nil, nil
}

// deliver hands out msgs[0] (again, when its AckWait passed or it was retried). Called with
// the store's lock held.
func (q *queue) deliver(now time.Time) *delivery {
	c, m := q.cons, q.tq.msgs[0]
	if c.headSeq != m.seq {
		c.headSeq, c.attempt = m.seq, 0
	}
	c.attempt++
	d := &delivery{q: q, msg: m, attempt: c.attempt, behind: len(q.tq.msgs) - 1}
	c.cur, c.due, c.hold = d, now.Add(c.ackWait), time.Time{}
	return d
}

func (q *queue) Close(ctx context.Context) error {
	if err := q.c.check(ctx); err != nil {
		return err
	}
	s := q.c.e.inbox
	s.mu.Lock()
	defer s.mu.Unlock()
	if q.tq.consumer == q.cons {
		q.tq.consumer = nil
		q.tq.changed.fire()
	}
	return nil
}

// delivery is one hand-out of a message. It can be settled while it is its consumer's
// current delivery; settled is guarded by the inbox store's lock.
type delivery struct {
	q       *queue
	msg     *message
	job     broker.Job // decoded by Next, for the caller alone
	attempt int
	behind  int
	settled bool   // acknowledged or dead-lettered through this delivery
	fence   *fence // FencedBy's: the lease every settle is conditioned on
}

var (
	_ broker.Delivery       = (*delivery)(nil)
	_ broker.FencedDelivery = (*delivery)(nil)
)

// FencedBy conditions d's settles on its tenant's lease carrying token: Ack, Retry and
// DeadLetter hold the lease store's lock, the lease checked, while they change the queue.
func (d *delivery) FencedBy(token uint64) broker.Delivery {
	d.fence = &fence{t: d.q.t, token: token}
	return d
}

func (d *delivery) decode() error {
	if err := json.Unmarshal(d.msg.data, &d.job); err != nil {
		return fmt.Errorf("mem: decode job %s: %w", d.msg.jobID, err)
	}
	return nil
}

func (d *delivery) Job() broker.Job { return d.job }
func (d *delivery) Attempt() int    { return d.attempt }
func (d *delivery) Behind() int     { return d.behind }

func (d *delivery) Extend(ctx context.Context) error {
	return d.settle(ctx, "extend", false, func(_ *inboxStore, now time.Time) {
		d.q.cons.due = now.Add(d.q.cons.ackWait)
	})
}

func (d *delivery) Ack(ctx context.Context) error {
	return d.fencedSettle(ctx, "ack", true, func(*inboxStore, time.Time) { d.remove() })
}

func (d *delivery) Retry(ctx context.Context, delay time.Duration) error {
	return d.fencedSettle(ctx, "retry", false, func(_ *inboxStore, now time.Time) {
		c := d.q.cons
		c.cur, c.hold = nil, now.Add(max(delay, 0))
		d.q.tq.changed.fire()
	})
}

func (d *delivery) DeadLetter(ctx context.Context, reason string) error {
	data, err := json.Marshal(struct {
		Job    json.RawMessage `json:"job"`
		Reason string          `json:"reason"`
		At     time.Time       `json:"at"`
	}{d.msg.data, reason, time.Now()})
	if err != nil {
		return fmt.Errorf("mem: dead-letter job %s: %w", d.msg.jobID, err)
	}
	return d.fencedSettle(ctx, "dead-letter", true, func(s *inboxStore, _ time.Time) {
		s.addDeadLetter(d.q.t, d.msg.jobID, data)
		d.remove()
	})
}

// fencedSettle is settle conditioned on d's fence, if it has one.
func (d *delivery) fencedSettle(ctx context.Context, what string, repeat bool, op func(s *inboxStore, now time.Time)) error {
	if d.fence != nil {
		unlock, err := d.q.c.e.leases.hold(d.fence, what+" job "+d.msg.jobID)
		if err != nil {
			return err
		}
		defer unlock()
	}
	return d.settle(ctx, what, repeat, op)
}

// settle applies op to the current delivery under the store's lock. A delivery that was
// already removed through this delivery returns nil when repeat is true (Ack and DeadLetter
// are idempotent); a stale one (given back, redelivered, or its queue closed or replaced)
// returns an error and changes nothing.
func (d *delivery) settle(ctx context.Context, what string, repeat bool, op func(s *inboxStore, now time.Time)) error {
	if err := d.q.c.check(ctx); err != nil {
		return err
	}
	s := d.q.c.e.inbox
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case d.settled && repeat:
		return nil
	case d.settled:
		return fmt.Errorf("mem: %s job %s: already settled", what, d.msg.jobID)
	case d.q.tq.consumer != d.q.cons || d.q.cons.cur != d:
		return fmt.Errorf("mem: %s job %s: the delivery is no longer current (its queue was closed or opened again, "+
			"or it was given back or delivered again)", what, d.msg.jobID)
	}
	op(s, time.Now())
	return nil
}

// remove takes the delivered message off the queue for good. Called with the store's lock held.
func (d *delivery) remove() {
	tq, c := d.q.tq, d.q.cons
	tq.msgs[0] = nil
	tq.msgs = tq.msgs[1:]
	c.cur, c.hold = nil, time.Time{}
	d.settled = true
	tq.changed.fire()
}
