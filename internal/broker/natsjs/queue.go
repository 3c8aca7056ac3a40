package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/retry"
	"github.com/webordinary/webordinary/internal/tenant"
)

// A tenant's queue reads its jobs straight from the inbox stream: the owner (the lease makes
// it the only one) gets the tenant's first message at or after its cursor, and removes it
// from the stream when it is done. No consumer is made or deleted per claim: a consumer's
// create and delete were two of the server's JetStream API requests on every claim (its
// heaviest steps after the lease writes), and on a cluster each consumer was a raft group of
// its own that had to elect a leader after a node was lost.
//
// One delivery at a time, as a consumer with MaxAckPending 1: Next returns nothing newer while
// one is unsettled, and the unsettled one again once its AckWait has passed (Extend restarts
// it). Retry leaves the message where it is, first in line, and holds it back for its delay.
// Ack removes the message (one synced write, as a work queue's acknowledgement was), without
// waiting for the server's answer; the cursor is past it, so it is not read again, and Close
// waits for every removal, so a release reads the tenant's pending count after them.
//
// Reads: a direct get (served by the stream itself, not by the API's workers) on a stream with
// one replica, whose only server is its leader; on more replicas the leader's message get, since
// a follower may answer a direct get from behind (a job just published missed, or one just
// removed served again). A job published by this client is followed by a signal on the tenant's
// wake subject, sent once the stream has stored it, so an owner waiting for the tenant's next
// job reads again at once; it also reads again every wakeEvery, for jobs published without one.
// The queue listens from its first wait to its Close. An owner with nothing to do reads once
// a poll, however often it calls Next.

// wakeEvery bounds a waiting owner's time between reads when no signal comes.
const wakeEvery = time.Second

func wakeSubject(t tenant.ID) string { return "wo.wake." + t.Subject() }

type queue struct {
	in      *inbox
	t       tenant.ID
	sh      shard
	subj    string
	ackWait time.Duration
	poll    time.Duration // wakeEvery; a test sets it longer
	reads   atomic.Int64  // reads made, for tests

	wake chan struct{} // a signal, from the first wait on; one pending at most

	mu        sync.Mutex
	sub       *nats.Subscription // the wake subject's, from the first wait on
	emptyAt   time.Time          // when the last read that found nothing started, while listening
	emptyFrom uint64             // and at which cursor
	cursor    uint64             // the first sequence this queue has not removed
	held      *delivery          // the unsettled delivery (or the retried message), if any
	due       time.Time          // when held comes again
	lastSeq   uint64             // the message last delivered, and how often
	attempts  int                //
	removing  sync.WaitGroup
	failed    error // the first removal that failed since the last Close
	closed    bool
}

// Open makes the tenant's queue; the server keeps no state for it.
func (in *inbox) Open(ctx context.Context, t tenant.ID, opts broker.QueueOptions) (broker.Queue, error) {
	if opts.AckWait <= 0 {
		opts.AckWait = time.Minute
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sh := in.a.shardOf(t)
	return &queue{in: in, t: t, sh: sh, subj: sh.subject + t.Subject(), ackWait: opts.AckWait, poll: wakeEvery, wake: make(chan struct{}, 1), cursor: 1}, nil
}

func (q *queue) Next(ctx context.Context, wait time.Duration) (broker.Delivery, error) {
	end := time.Now().Add(wait)
	woke := false // a signal came since the last read: read again
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return nil, fmt.Errorf("natsjs: next job for %s: the queue is closed", q.t)
		}
		if q.held != nil {
			due := q.due
			if now := time.Now(); now.Before(due) {
				q.mu.Unlock()
				if !now.Before(end) {
					return nil, broker.ErrNoMessage
				}
				if err := retry.Sleep(ctx, min(due.Sub(now), end.Sub(now))); err != nil {
					return nil, err
				}
				continue
			}
			q.held, q.emptyAt = nil, time.Time{} // its AckWait or retry delay has passed: read it again
		}
		from, listening, emptyAt := q.cursor, q.sub != nil, q.emptyAt
		// Nothing to read: the last read at this cursor found nothing, less than a poll ago,
		// while listening, and no signal has come since (an idle owner's Nexts, one after
		// another, read once a poll, not once each).
		skip := listening && !woke && q.emptyFrom == from && time.Since(emptyAt) < q.poll && len(q.wake) == 0
		q.mu.Unlock()

		if !skip {
			if listening {
				select { // a signal sent before this read is answered by it
				case <-q.wake:
				default:
				}
			}
			start := time.Now()
			d, err := q.get(ctx, from)
			switch {
			case err != nil:
				return nil, err
			case d != nil:
				return d, nil
			}
			emptyAt, woke = start, false
			if listening {
				q.mu.Lock()
				q.emptyAt, q.emptyFrom = start, from
				q.mu.Unlock()
			}
		}
		left := time.Until(end)
		if left <= 0 {
			return nil, broker.ErrNoMessage
		}
		if !listening {
			// The first wait: listen for signals from now on, then read once more, so a job
			// stored between the read above and the subscription is not waited for.
			if err := q.listen(); err != nil {
				return nil, ctxErr(ctx, fmt.Errorf("natsjs: next job for %s: %w", q.t, err))
			}
			continue
		}
		t := time.NewTimer(max(min(left, q.poll-time.Since(emptyAt)), time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-q.wake:
			t.Stop()
			woke = true
		case <-t.C:
			if !time.Now().Before(end) {
				return nil, broker.ErrNoMessage // the next Next reads when it is time
			}
		}
	}
}

// listen subscribes to the tenant's wake subject for the rest of the queue's life; signals
// that come while one is pending are merged into it. Close unsubscribes; a queue its owner
// drops without closing it (its lease was lost, and the server's state is no longer its to
// touch) is unsubscribed when it is collected.
func (q *queue) listen() error {
	wake := q.wake // the handler must not hold q, or q is never collected
	sub, err := q.in.a.nc.Subscribe(wakeSubject(q.t), func(*nats.Msg) {
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.sub != nil {
		_ = sub.Unsubscribe()
		return nil
	}
	q.sub = sub
	runtime.AddCleanup(q, func(s *nats.Subscription) { _ = s.Unsubscribe() }, sub)
	return nil
}

// get reads the tenant's first message at or after from; nil when there is none.
func (q *queue) get(ctx context.Context, from uint64) (*delivery, error) {
	for {
		seq, m, behind, err := q.read(ctx, from)
		if err != nil || m == nil {
			return nil, err
		}
		d := &delivery{q: q, seq: seq, behind: behind}
		if err := json.Unmarshal(m.Data, &d.job); err != nil {
			// Undecodable: it could never run, and would pin its owner forever.
			q.in.a.cfg.Logger.ErrorContext(ctx, "removing an undecodable job", slog.String("tenant", q.t.String()), slog.Uint64("seq", seq), slog.Any("err", err))
			if err := q.remove(ctx, seq); err != nil {
				return nil, ctxErr(ctx, fmt.Errorf("natsjs: next job for %s: remove undecodable message %d: %w", q.t, seq, err))
			}
			from = seq + 1
			continue
		}
		if rev, err := strconv.ParseUint(m.Header.Get(createdHeader), 10, 64); err == nil && rev > 0 {
			d.created = rev
			q.in.jobs.seed(d.job, rev)
		}
		q.mu.Lock()
		if q.cursor > seq { // acknowledged meanwhile (a late Ack of a delivery given up): read on
			from = q.cursor
			q.mu.Unlock()
			continue
		}
		defer q.mu.Unlock()
		if seq == q.lastSeq {
			q.attempts++
		} else {
			q.lastSeq, q.attempts = seq, 1
		}
		d.attempt = q.attempts
		q.held, q.due, q.emptyAt = d, time.Now().Add(q.ackWait), time.Time{}
		return d, nil
	}
}

// read asks the stream for the tenant's first message at or after from: its sequence, the
// message, and how many of the tenant's follow it (-1: not told).
func (q *queue) read(ctx context.Context, from uint64) (uint64, *nats.Msg, int, error) {
	q.reads.Add(1)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second) // as the JetStream client's default
	defer cancel()
	if q.sh.direct() {
		seq, m, behind, err := q.sh.firstDirect(rctx, q.in.a.nc, q.subj, from)
		if !errors.Is(err, nats.ErrNoResponders) { // else direct gets were turned off since (an older binary's setup)
			if err != nil {
				err = fmt.Errorf("natsjs: next job for %s: %w", q.t, err)
			}
			return seq, m, behind, ctxErr(ctx, err)
		}
	}
	req, _ := json.Marshal(map[string]any{"seq": from, "next_by_subj": q.subj})
	resp, err := q.in.a.nc.RequestWithContext(rctx, "$JS.API.STREAM.MSG.GET."+q.sh.name, req)
	if err != nil {
		return 0, nil, 0, ctxErr(ctx, fmt.Errorf("natsjs: next job for %s: %w", q.t, err))
	}
	var r struct {
		Message *struct {
			Seq    uint64 `json:"seq"`
			Header []byte `json:"hdrs"`
			Data   []byte `json:"data"`
		} `json:"message"`
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return 0, nil, 0, fmt.Errorf("natsjs: next job for %s: %w", q.t, err)
	}
	if r.Error != nil {
		if r.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return 0, nil, 0, nil
		}
		return 0, nil, 0, fmt.Errorf("natsjs: next job for %s: %w", q.t, r.Error)
	}
	if r.Message == nil {
		return 0, nil, 0, fmt.Errorf("natsjs: next job for %s: an answer without a message", q.t)
	}
	m := &nats.Msg{Subject: q.subj, Data: r.Message.Data, Header: nats.Header{}}
	if len(r.Message.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(r.Message.Header)
		if err != nil {
			return 0, nil, 0, fmt.Errorf("natsjs: next job for %s: its headers: %w", q.t, err)
		}
		m.Header = h
	}
	return r.Message.Seq, m, -1, nil
}

// remove deletes seq from the stream and waits for the answer; a message already gone is not
// an error.
func (q *queue) remove(ctx context.Context, seq uint64) error {
	req, _ := json.Marshal(map[string]any{"seq": seq, "no_erase": true})
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := q.in.a.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.DELETE."+q.sh.name, req)
	if err != nil {
		return err
	}
	var r struct {
		Success bool                `json:"success"`
		Error   *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return err
	}
	if r.Error != nil && r.Error.ErrorCode != jsErrSequenceNotFound && !(r.Error.ErrorCode == jsErrMsgDeleteFailed && r.Error.Description == "no message found") {
		return r.Error
	}
	return nil
}

// The server's error codes for a removal of a message that is not there.
const (
	jsErrSequenceNotFound jetstream.ErrorCode = 10043
	jsErrMsgDeleteFailed  jetstream.ErrorCode = 10057
)

// settle ends d's delivery: removed (the cursor moves past it, the removal goes on in the
// background) or held back until again.
func (q *queue) settle(d *delivery, remove bool, again time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !remove {
		if q.held == d {
			q.due, d.retried = again, true
		}
		return // a delivery already given up (its AckWait passed) is read again anyway
	}
	if q.cursor > d.seq {
		return // removed already
	}
	if q.held != nil && q.held.seq == d.seq {
		q.held = nil
	}
	q.cursor = d.seq + 1
	tracked := !q.closed // Close waits for it (an Ack after Close is not waited for)
	if tracked {
		q.removing.Add(1)
	}
	go func() {
		if tracked {
			defer q.removing.Done()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := q.remove(ctx, d.seq); err != nil {
			// Told now and at Close; the job stays in the stream, and its next reader
			// re-settles it from its final record.
			q.in.a.cfg.Logger.Warn("removing an acknowledged job failed; it will be settled again",
				slog.String("tenant", q.t.String()), slog.String("job", d.job.ID), slog.Any("err", err))
			q.mu.Lock()
			if q.failed == nil {
				q.failed = fmt.Errorf("natsjs: remove job %s: %w", d.job.ID, err)
			}
			q.mu.Unlock()
		}
	}()
}

// Close waits for the removals of acknowledged jobs; an unsettled delivery stays in the
// stream for the next Open.
func (q *queue) Close(ctx context.Context) error {
	q.mu.Lock()
	q.closed, q.held = true, nil
	sub := q.sub
	q.mu.Unlock()
	if sub != nil {
		_ = sub.Unsubscribe()
	}
	done := make(chan struct{})
	go func() { q.removing.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	err := q.failed
	q.failed = nil
	if err != nil {
		return fmt.Errorf("natsjs: close queue %s: %w", q.t, err)
	}
	return nil
}

type delivery struct {
	q       *queue
	seq     uint64
	job     broker.Job
	created uint64 // the revision its record was created at, when its message says
	attempt int
	behind  int
	retried bool // by Retry: held back for its delay (under the queue's lock)
}

func (d *delivery) Job() broker.Job { return d.job }
func (d *delivery) Attempt() int    { return d.attempt }
func (d *delivery) Behind() int     { return d.behind }

func (d *delivery) Extend(ctx context.Context) error {
	d.q.mu.Lock()
	defer d.q.mu.Unlock()
	if d.q.held == d && !d.retried { // a Retry's delay is not stretched by a late heartbeat
		d.q.due = time.Now().Add(d.q.ackWait)
	}
	return ctx.Err()
}

// Ack does not wait for the server's confirmation: a lost removal means the job is read
// again by a later owner, which settles it idempotently from its final record.
func (d *delivery) Ack(ctx context.Context) error {
	d.q.settle(d, true, time.Time{})
	return ctx.Err()
}

func (d *delivery) Retry(ctx context.Context, delay time.Duration) error {
	d.q.settle(d, false, time.Now().Add(delay))
	return ctx.Err()
}

func (d *delivery) DeadLetter(ctx context.Context, reason string) error {
	data, _ := json.Marshal(broker.DeadLetter{Job: d.job, Reason: reason, At: time.Now()})
	_, err := d.q.in.a.js.Publish(ctx, subjDLQ+d.q.t.Subject(), data, jetstream.WithMsgID("dlq-"+d.job.ID))
	if err != nil {
		return ctxErr(ctx, wrap("dead-letter", d.job.ID, err))
	}
	return d.Ack(ctx)
}
