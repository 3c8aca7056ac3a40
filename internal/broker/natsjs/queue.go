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
//
// Ack moves the cursor past the message, so it is not read again; the messages below the
// cursor are removed together, with one purge of the tenant's subject up to it (the server
// writes their tombstones and fsyncs once): when the owner idles (a second read at the same
// cursor finds nothing: an owner that finds nothing once and gets the next job on the
// publish's signal, as under a steady stream of jobs, would otherwise purge after every job),
// every maxOwed acknowledgements, and at Close, which waits for it, so a release reads the
// tenant's pending count after them. A removal per Ack was a synced write and a JetStream API
// request per job, a third of the server's synced writes. Only this tenure's acknowledged
// messages are below the cursor (sequences grow: a job published later is above it). An owner
// that loses its lease leaves what it had not removed: the next owner reads those jobs again
// and re-settles them from their final records.
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

// maxOwed is how many acknowledged messages an owner that keeps finding jobs leaves in the
// stream before it removes them.
const maxOwed = 16

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

	mu       sync.Mutex
	sub      *nats.Subscription // the wake subject's, from the first wait on
	emptyAt  time.Time          // when the last read that found nothing (at idleFrom) started, while listening
	idleFrom uint64             // the cursor at which the last read found nothing
	cursor   uint64             // the first sequence this queue has not acknowledged
	purgedTo uint64             // the tenant's messages below it are removed (those below cursor are owed)
	owed     int                // acknowledgements since the last purge began
	purging  bool               // a purge is under way (one at a time)
	held     *delivery          // the unsettled delivery (or the retried message), if any
	due      time.Time          // when held comes again
	lastSeq  uint64             // the message last delivered, and how often
	attempts int                //
	removing sync.WaitGroup     // the purge under way
	failed   error              // the first removal that failed since the last Close
	closed   bool
	ahead    []directMsg // the tenant's messages read ahead, in order (see readAhead)
	after    int         // how many followed the last message read (0: none or not told)
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
	q := &queue{in: in, t: t, sh: sh, subj: sh.subject + t.Subject(), ackWait: opts.AckWait, poll: wakeEvery, wake: make(chan struct{}, 1), cursor: 1, purgedTo: 1}
	if first, ok := in.takePeek(t); ok && sh.direct() {
		// The worker counted the tenant's jobs just before it took the lease: that read is
		// the first read (TestAnOwnerStartsFromItsCount).
		q.ahead, q.after = []directMsg{first}, max(first.behind, 0)
	}
	return q, nil
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
		skip := listening && !woke && q.idleFrom == from && time.Since(emptyAt) < q.poll && len(q.wake) == 0
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
			q.mu.Lock()
			at := q.cursor        // from, or past it (an undecodable message passed over, a late Ack)
			if q.idleFrom == at { // nothing twice at this cursor: the owner idles, remove what is done
				q.purgeLocked()
			}
			q.idleFrom = at
			if listening {
				q.emptyAt = start
			}
			q.mu.Unlock()
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
			// Undecodable: it could never run, and would pin its owner forever. Passed over
			// as if acknowledged (nothing of the tenant's lies between the cursor and it), and
			// removed with the acknowledged jobs.
			q.in.a.cfg.Logger.ErrorContext(ctx, "removing an undecodable job", slog.String("tenant", q.t.String()), slog.Uint64("seq", seq), slog.Any("err", err))
			q.mu.Lock()
			if q.cursor <= seq {
				q.cursor, q.owed = seq+1, q.owed+1
			}
			q.mu.Unlock()
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
	if d, ok := q.readAhead(from); ok {
		return d.seq, d.m, d.behind, nil
	}
	q.reads.Add(1)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second) // as the JetStream client's default
	defer cancel()
	if q.sh.direct() {
		msgs, err := q.sh.directBatch(rctx, q.in.a.nc, q.subj, from, q.batch())
		if !errors.Is(err, nats.ErrNoResponders) { // else direct gets were turned off since (an older binary's setup)
			if err != nil || len(msgs) == 0 {
				if err != nil {
					err = fmt.Errorf("natsjs: next job for %s: %w", q.t, err)
				}
				return 0, nil, 0, ctxErr(ctx, err)
			}
			q.mu.Lock()
			q.ahead, q.after = msgs, max(msgs[len(msgs)-1].behind, 0)
			q.mu.Unlock()
			return msgs[0].seq, msgs[0].m, msgs[0].behind, nil
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

// readAhead returns the tenant's first message at or after from when the last read holds it:
// a read gets up to maxAhead of the tenant's messages at once when the one before said more
// were queued, rather than one request per job. What it read is still the tenant's first
// messages at or after any later cursor: the cursor only moves forward, a message published
// since has a higher sequence than any of them, and only the owner removes the messages it
// has acknowledged (those below its cursor).
func (q *queue) readAhead(from uint64) (directMsg, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.ahead) > 0 && q.ahead[0].seq < from {
		q.ahead = q.ahead[1:]
	}
	if len(q.ahead) == 0 {
		q.ahead = nil
		return directMsg{}, false
	}
	return q.ahead[0], true
}

// batch is how many messages the next read asks for: those the last message read said
// followed it, and that one, up to maxAhead; one when it did not say.
func (q *queue) batch() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return min(q.after+1, maxAhead)
}

// maxAhead bounds the messages one read gets.
const maxAhead = 16

// settle ends d's delivery: acknowledged (the cursor moves past it; it is removed with the
// others below the cursor, see purgeLocked) or held back until again.
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
		return // acknowledged already
	}
	if q.held != nil && q.held.seq == d.seq {
		q.held = nil
	}
	q.cursor = d.seq + 1
	if q.owed++; q.owed >= maxOwed {
		q.purgeLocked()
	}
}

// purgeLocked starts removing the acknowledged messages (those below the cursor) in the
// background, unless none are owed, a purge is under way (it goes on to them when it ends),
// or the queue is closed (Close removes them itself). q.mu is held.
func (q *queue) purgeLocked() {
	if q.purging || q.closed || q.cursor <= q.purgedTo {
		return
	}
	q.purging, q.owed = true, 0
	q.removing.Add(1)
	go func() {
		defer q.removing.Done()
		for {
			q.mu.Lock()
			to := q.cursor
			q.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := q.purge(ctx, to)
			cancel()
			q.mu.Lock()
			q.settlePurge(to, err)
			again := err == nil && !q.closed && q.owed >= maxOwed
			if again {
				q.owed = 0
			} else {
				q.purging = false
			}
			q.mu.Unlock()
			if !again {
				return
			}
		}
	}()
}

// settlePurge notes a purge up to to: done, or failed (told now and at Close; the jobs stay
// in the stream, and their next reader re-settles them from their final records). q.mu is held.
func (q *queue) settlePurge(to uint64, err error) {
	if err == nil {
		q.purgedTo = max(q.purgedTo, to)
		return
	}
	q.in.a.cfg.Logger.Warn("removing acknowledged jobs failed; they will be settled again",
		slog.String("tenant", q.t.String()), slog.Uint64("below", to), slog.Any("err", err))
	if q.failed == nil {
		q.failed = fmt.Errorf("natsjs: remove %s's jobs below %d: %w", q.t, to, err)
	}
}

// purge removes the tenant's messages below sequence to (JetStream's purge with a subject
// filter, "up to but not including"), and waits for the answer.
func (q *queue) purge(ctx context.Context, to uint64) error {
	return q.sh.Purge(ctx, jetstream.WithPurgeSubject(q.subj), jetstream.WithPurgeSequence(to))
}

// Close removes the acknowledged jobs still in the stream and waits for it; an unsettled
// delivery stays in the stream for the next Open.
func (q *queue) Close(ctx context.Context) error {
	q.mu.Lock()
	q.closed, q.held, q.ahead = true, nil, nil
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
	if to := q.cursor; to > q.purgedTo {
		q.mu.Unlock()
		err := q.purge(ctx, to)
		q.mu.Lock()
		q.settlePurge(to, err)
	}
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
	retried bool   // by Retry: held back for its delay (under the queue's lock)
	token   uint64 // FencedBy's: the lease every settle is conditioned on (0: none)
}

var _ broker.FencedDelivery = (*delivery)(nil)

// FencedBy conditions d's settles on its tenant's lease carrying token, in the store: each
// Ack, Retry and DeadLetter first writes its settle mark on the condition of the tenant's
// fence key (see settleMark), and is refused with ErrLeaseLost, changing nothing, once a
// newer owner acquired the tenant; an Ack or DeadLetter after the job's result, published
// fenced under token through the same connection, writes none (see fence).
func (d *delivery) FencedBy(token uint64) broker.Delivery {
	d.token = token
	return d
}

// fence writes d's settle mark when d is fenced, unless this client published d's job's
// result under d's token (stored, not a duplicate: a cluster answers a duplicate before it
// checks the fence): that publish was fenced by the same acquisition (the results' fence key
// is raised with the records'), so the job was finished under the lease, and its message may
// go whoever removes it. A stale owner's Ack after such a result moves its cursor past a job
// that is done, and its purge removes it later; a later owner that read the job meanwhile
// re-settles it from its final record. Retry, and a settle with no result, write the mark.
func (d *delivery) fence(ctx context.Context) error {
	if d.token == 0 || d.q.in.a.finished.take(d.job.ID, d.token) {
		return nil
	}
	return d.q.in.a.settleMark(ctx, d.q.t, d.token, d.seq)
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

// Ack moves the queue's cursor past the job, with no request to the engine but a fenced
// delivery's settle mark: its removal comes with the others' (see purgeLocked). A removal
// that never happens (the owner lost its lease first) means the job is read again by a later
// owner, which settles it idempotently from its final record.
func (d *delivery) Ack(ctx context.Context) error {
	if err := d.fence(ctx); err != nil {
		return err
	}
	d.q.settle(d, true, time.Time{})
	return ctx.Err()
}

func (d *delivery) Retry(ctx context.Context, delay time.Duration) error {
	d.q.in.a.finished.take(d.job.ID, d.token) // a job retried is not finished: its mark is written
	if err := d.fence(ctx); err != nil {
		return err
	}
	d.q.settle(d, false, time.Now().Add(delay))
	return ctx.Err()
}

// DeadLetter writes a fenced delivery's settle mark before the dead letter, so a stale owner
// leaves none, but for a job whose dead result it published under its lease (see fence).
func (d *delivery) DeadLetter(ctx context.Context, reason string) error {
	if err := d.fence(ctx); err != nil {
		return err
	}
	data, _ := json.Marshal(broker.DeadLetter{Job: d.job, Reason: reason, At: time.Now()})
	_, err := d.q.in.a.js.Publish(ctx, subjDLQ+d.q.t.Subject(), data, jetstream.WithMsgID("dlq-"+d.job.ID))
	if err != nil {
		return ctxErr(ctx, wrap("dead-letter", d.job.ID, err))
	}
	d.q.settle(d, true, time.Time{})
	return ctx.Err()
}
