package outbox

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"
)

// maxBackoff caps the delay between attempts.
const maxBackoff = 10 * time.Minute

// backoff is the delay after the n-th failed attempt: 1s, 2s, 4s ... capped at maxBackoff.
func backoff(n int) time.Duration {
	if n < 1 {
		return time.Second
	}
	if n > 11 { // 1s<<10 already exceeds the cap
		return maxBackoff
	}
	return min(time.Second<<(n-1), maxBackoff)
}

// Run delivers due messages until ctx ends, starting with what a previous process left in the
// spool (or, on an engine, what any serve left queued there). Messages are sent one at a time,
// oldest due first. A send interrupted by ctx is not counted as an attempt. Run returns nil
// when ctx ends, or an error if it is already running.
func (o *Outbox) Run(ctx context.Context) error {
	if !o.running.CompareAndSwap(false, true) {
		return errors.New("outbox: Run is already running")
	}
	defer o.running.Store(false)
	o.scan(ctx)
	o.log.InfoContext(ctx, "outbox: running", slog.Int("queued", o.Stats().Queued))
	for {
		o.housekeep(ctx)
		o.scan(ctx)
		o.sendDue(ctx)
		if !o.sleep(ctx) {
			o.log.InfoContext(ctx, "outbox: stopped", slog.Any("cause", context.Cause(ctx)))
			return nil
		}
	}
}

// housekeep prunes old delivery records.
func (o *Outbox) housekeep(ctx context.Context) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.prune(ctx); err != nil && ctx.Err() == nil {
		o.log.WarnContext(ctx, "outbox: prune sent records", slog.Any("err", err))
	}
}

// scan reads a shared store's queue when it is time to, to learn of messages other serves
// queued and left. Messages this outbox queued since the scan began are kept; others the
// store no longer holds were sent or parked elsewhere.
func (o *Outbox) scan(ctx context.Context) {
	every := o.keep.rescan()
	if every == 0 || o.cfg.Now().Before(o.nextScan) {
		return
	}
	began := o.cfg.Now()
	queued, failed, err := o.keep.load(ctx)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.nextScan = o.cfg.Now().Add(every)
	if err != nil {
		if ctx.Err() == nil {
			o.log.WarnContext(ctx, "outbox: read the engine's queue", slog.Any("err", err))
		}
		return
	}
	for key, m := range o.queued {
		if _, ok := queued[key]; !ok && !m.Enqueued.Before(began) {
			queued[key] = m
		}
	}
	o.queued, o.failed = queued, failed
}

// sendDue delivers every message that is due now.
func (o *Outbox) sendDue(ctx context.Context) {
	for _, key := range o.due() {
		if ctx.Err() != nil {
			return
		}
		o.deliver(ctx, key)
	}
}

// due returns the keys of due messages, earliest first.
func (o *Outbox) due() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.cfg.Now()
	var keys []string
	for key, m := range o.queued {
		if !m.NextAt.After(now) {
			keys = append(keys, key)
		}
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(o.queued[a].NextAt.Compare(o.queued[b].NextAt), cmp.Compare(a, b))
	})
	return keys
}

// sleep waits for the next due message or scan, an Enqueue, an hour, or the end of ctx (false).
func (o *Outbox) sleep(ctx context.Context) bool {
	t := time.NewTimer(o.untilNext())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-o.wake:
	case <-t.C:
	}
	return true
}

// untilNext is the time until the earliest queued message is due or the next scan, at most
// an hour.
func (o *Outbox) untilNext() time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	wait, now := time.Hour, o.cfg.Now()
	for _, m := range o.queued {
		wait = min(wait, max(m.NextAt.Sub(now), 0))
	}
	if o.keep.rescan() > 0 {
		wait = min(wait, max(o.nextScan.Sub(now), 0))
	}
	return wait
}

// deliver makes one attempt at sending the message queued under key, if it is still this
// outbox's to send.
func (o *Outbox) deliver(ctx context.Context, key string) {
	m, msg, res, err := o.keep.take(ctx, key)
	switch res {
	case takeGone:
		if err != nil {
			o.log.WarnContext(ctx, "outbox: remove a message sent before", slog.String("key", key), slog.Any("err", err))
		}
		o.forget(key)
		return
	case takeBad:
		o.unreadable(ctx, key, err)
		return
	case takeLater:
		o.later(ctx, key, m, err)
		return
	}
	err = o.send(ctx, m, msg)
	switch {
	case err == nil:
		o.succeeded(ctx, key, m)
	case ctx.Err() != nil:
		// Stopping: the message stays queued for the next Run, with no attempt charged.
		o.keep.release(ctx, key, m)
	default:
		o.attemptFailed(ctx, key, m, msg, err)
	}
}

// send hands the message to the Sender. On an engine the send is cut off at half the claim's
// lease, so it ends while the claim is this outbox's.
func (o *Outbox) send(ctx context.Context, m meta, msg []byte) error {
	if e := o.cfg.Engine; e != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.lease()/2)
		defer cancel()
	}
	return o.cfg.Sender.Send(ctx, m.From, m.To, msg)
}

// forget drops key from the queue: it was sent or parked elsewhere.
func (o *Outbox) forget(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.queued, key)
}

// later keeps key queued until m.NextAt (another serve holds it, or it is not due), or for a
// few seconds when the store could not be read.
func (o *Outbox) later(ctx context.Context, key string, m meta, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.log.WarnContext(ctx, "outbox: read queued message", slog.String("key", key), slog.Any("err", err))
		m = o.queued[key]
		m.NextAt = o.cfg.Now().Add(5 * time.Second)
	}
	o.queued[key] = m
}

// succeeded records the delivery and removes the message from the queue.
func (o *Outbox) succeeded(ctx context.Context, key string, m meta) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.keep.delivered(ctx, key, m, o.cfg.Now()); err != nil {
		o.log.ErrorContext(ctx, "outbox: record delivery", slog.String("message_id", m.MessageID), slog.Any("err", err))
	}
	delete(o.queued, key)
	o.sent++
	o.log.InfoContext(ctx, "outbox: sent", slog.String("message_id", m.MessageID),
		slog.Any("to", m.To), slog.Int("attempt", m.Attempts+1))
}

// attemptFailed schedules a retry, or parks the message when the failure is permanent or the
// attempts are used up. Failures not classified by the Sender count as temporary.
func (o *Outbox) attemptFailed(ctx context.Context, key string, m meta, msg []byte, err error) {
	m.Attempts++
	m.LastError = err.Error()
	if errors.Is(err, ErrPermanent) || m.Attempts >= o.cfg.MaxAttempts {
		o.park(ctx, key, m, msg)
		return
	}
	m.NextAt = o.cfg.Now().Add(backoff(m.Attempts))
	o.mu.Lock()
	defer o.mu.Unlock()
	if werr := o.keep.retry(ctx, key, m, msg); werr != nil {
		o.log.WarnContext(ctx, "outbox: record attempt", slog.String("message_id", m.MessageID), slog.Any("err", werr))
	}
	o.queued[key] = m
	o.log.WarnContext(ctx, "outbox: send failed, will retry", slog.String("message_id", m.MessageID),
		slog.Int("attempt", m.Attempts), slog.Time("next_at", m.NextAt), slog.Any("err", err))
}

// park moves the message aside with its error. If that cannot be written the message stays
// queued and is retried after the longest backoff.
func (o *Outbox) park(ctx context.Context, key string, m meta, msg []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	newly, err := o.keep.park(ctx, key, m, msg)
	if err != nil {
		o.log.ErrorContext(ctx, "outbox: park failed message", slog.String("message_id", m.MessageID), slog.Any("err", err))
		m.NextAt = o.cfg.Now().Add(maxBackoff)
		o.queued[key] = m
		return
	}
	delete(o.queued, key)
	if newly {
		o.failed++
	}
	o.log.ErrorContext(ctx, "outbox: message parked as undeliverable", slog.String("message_id", m.MessageID),
		slog.Any("to", m.To), slog.Int("attempts", m.Attempts), slog.String("err", m.LastError))
}

// unreadable counts a queued message the store could not read (and moved aside).
func (o *Outbox) unreadable(ctx context.Context, key string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.log.ErrorContext(ctx, "outbox: unreadable queued message moved to failed", slog.String("key", key), slog.Any("err", err))
	delete(o.queued, key)
	o.failed++
}
