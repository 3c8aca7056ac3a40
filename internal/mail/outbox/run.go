package outbox

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	"github.com/webordinary/webordinary/internal/durable"
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
// spool. Messages are sent one at a time, oldest due first. A send interrupted by ctx is not
// counted as an attempt. Run returns nil when ctx ends, or an error if it is already running.
func (o *Outbox) Run(ctx context.Context) error {
	if !o.running.CompareAndSwap(false, true) {
		return errors.New("outbox: Run is already running")
	}
	defer o.running.Store(false)
	o.log.InfoContext(ctx, "outbox: running", slog.Int("queued", o.Stats().Queued))
	for {
		o.housekeep(ctx)
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
	if err := o.prune(); err != nil {
		o.log.WarnContext(ctx, "outbox: prune sent records", slog.Any("err", err))
	}
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

// sleep waits for the next due message, an Enqueue, an hour, or the end of ctx (false).
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

// untilNext is the time until the earliest queued message is due, at most an hour.
func (o *Outbox) untilNext() time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	wait, now := time.Hour, o.cfg.Now()
	for _, m := range o.queued {
		wait = min(wait, max(m.NextAt.Sub(now), 0))
	}
	return wait
}

// deliver makes one attempt at sending the message queued under key.
func (o *Outbox) deliver(ctx context.Context, key string) {
	m, msg, err := readRecord(filepath.Join(o.spool.path(queueDir), key+msgExt))
	if err != nil {
		o.unreadable(ctx, key, err)
		return
	}
	err = o.cfg.Sender.Send(ctx, m.From, m.To, msg)
	switch {
	case err == nil:
		o.succeeded(ctx, key, m)
	case ctx.Err() != nil:
		// Stopping: the message stays queued for the next Run, with no attempt charged.
	default:
		o.attemptFailed(ctx, key, m, msg, err)
	}
}

// succeeded records the delivery, then removes the message from the queue. A crash in between
// leaves the sent record, which Open uses to drop the queued copy instead of re-sending it.
func (o *Outbox) succeeded(ctx context.Context, key string, m meta) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.spool.markSent(key, o.cfg.Now()); err != nil {
		o.log.WarnContext(ctx, "outbox: record delivery", slog.String("message_id", m.MessageID), slog.Any("err", err))
	}
	if err := durable.Remove(o.spool.path(queueDir), key+msgExt); err != nil {
		o.log.ErrorContext(ctx, "outbox: remove sent message from queue", slog.String("message_id", m.MessageID), slog.Any("err", err))
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
	if werr := o.spool.write(queueDir, key, m, msg); werr != nil {
		o.log.WarnContext(ctx, "outbox: record attempt", slog.String("message_id", m.MessageID), slog.Any("err", werr))
	}
	o.queued[key] = m
	o.log.WarnContext(ctx, "outbox: send failed, will retry", slog.String("message_id", m.MessageID),
		slog.Int("attempt", m.Attempts), slog.Time("next_at", m.NextAt), slog.Any("err", err))
}

// park moves the message to failed/ with its error. If that cannot be written the message stays
// queued and is retried after the longest backoff.
func (o *Outbox) park(ctx context.Context, key string, m meta, msg []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	existed := o.spool.exists(failedDir, key+msgExt)
	if err := o.spool.write(failedDir, key, m, msg); err != nil {
		o.log.ErrorContext(ctx, "outbox: park failed message", slog.String("message_id", m.MessageID), slog.Any("err", err))
		m.NextAt = o.cfg.Now().Add(maxBackoff)
		o.queued[key] = m
		return
	}
	if err := durable.Remove(o.spool.path(queueDir), key+msgExt); err != nil {
		o.log.ErrorContext(ctx, "outbox: remove parked message from queue", slog.String("message_id", m.MessageID), slog.Any("err", err))
	}
	delete(o.queued, key)
	if !existed {
		o.failed++
	}
	o.log.ErrorContext(ctx, "outbox: message parked in failed/", slog.String("message_id", m.MessageID),
		slog.Any("to", m.To), slog.Int("attempts", m.Attempts), slog.String("err", m.LastError))
}

// unreadable moves a queue record that cannot be read aside.
func (o *Outbox) unreadable(ctx context.Context, key string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.log.ErrorContext(ctx, "outbox: unreadable queued message moved to failed/", slog.String("key", key), slog.Any("err", err))
	if qerr := o.spool.quarantine(key); qerr != nil {
		o.log.ErrorContext(ctx, "outbox: move unreadable message", slog.String("key", key), slog.Any("err", qerr))
	}
	delete(o.queued, key)
	o.failed++
}
