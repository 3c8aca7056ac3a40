package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/webordinary/webordinary/internal/durable"
)

// Config configures an Outbox.
type Config struct {
	// Dir is the spool directory, created if missing. Required. Only one Outbox (in one
	// process) may use a directory at a time.
	Dir string
	// Sender delivers the messages. Required.
	Sender Sender
	// MaxAttempts is how many temporary failures a message may have before it is parked in
	// failed/. Default 20 (about two hours with the backoff of 1s, 2s, 4s ... capped at 10m).
	MaxAttempts int
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock for scheduling retries and remembering deliveries. Default time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Dir == "":
		return errors.New("outbox: Dir is required")
	case c.Sender == nil:
		return errors.New("outbox: Sender is required")
	case c.MaxAttempts < 1:
		return fmt.Errorf("outbox: MaxAttempts %d must be at least 1", c.MaxAttempts)
	}
	return nil
}

// Outbox is a durable queue of composed messages. Enqueue stores a message; Run delivers it,
// retrying temporary failures with exponential backoff and parking permanent or exhausted ones
// in failed/ with their error. Delivery is at least once: a crash between sending and updating
// the spool sends the message again after restart, under the same Message-ID.
//
// All methods are safe for concurrent use.
type Outbox struct {
	cfg     Config
	spool   spool
	log     *slog.Logger
	wake    chan struct{}
	running atomic.Bool

	mu        sync.Mutex
	queued    map[string]meta // by spool key
	sent      uint64
	failed    int
	lastPrune time.Time
}

// Stats is a snapshot for metrics.
type Stats struct {
	// Queued is how many messages wait in the spool, including those retrying (gauge).
	Queued int
	// Retrying is how many queued messages failed at least once (gauge).
	Retrying int
	// Sent is how many messages this Outbox delivered since Open (counter).
	Sent uint64
	// Failed is how many messages are parked in failed/, including earlier runs' (gauge).
	Failed int
}

// Open opens (creating if needed) the spool in cfg.Dir and loads what a previous process left
// queued. Unreadable queue records are moved to failed/ with a .corrupt suffix.
func Open(cfg Config) (*Outbox, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	o := &Outbox{cfg: cfg, spool: spool{cfg.Dir}, log: cfg.Logger, wake: make(chan struct{}, 1)}
	if err := o.spool.init(); err != nil {
		return nil, fmt.Errorf("outbox: open spool %s: %w", cfg.Dir, err)
	}
	if err := o.recover(); err != nil {
		return nil, fmt.Errorf("outbox: open spool %s: %w", cfg.Dir, err)
	}
	return o, nil
}

// recover loads the queue, drops messages delivered just before a crash and counts failures.
func (o *Outbox) recover() error {
	queued, bad, err := o.spool.load()
	if err != nil {
		return err
	}
	for _, key := range bad {
		o.log.Warn("outbox: unreadable queued message moved to failed/", slog.String("key", key))
	}
	for key, m := range queued {
		if t, ok := o.spool.sentAt(key); ok && !t.Before(m.Enqueued) {
			if err := durable.Remove(o.spool.path(queueDir), key+msgExt); err != nil {
				return err
			}
			delete(queued, key)
		}
	}
	failed, err := o.spool.countFailed()
	if err != nil {
		return err
	}
	o.queued, o.failed = queued, failed
	return o.prune()
}

// Enqueue stores msg for delivery to the envelope recipients to, with from as the envelope
// sender. It returns once the message is durably in the spool. msg must carry a Message-ID
// ([ErrNoMessageID] otherwise); enqueueing a Message-ID that is already queued, or was
// delivered in the last 24 hours, is a no-op. Enqueue does not wait for delivery.
func (o *Outbox) Enqueue(ctx context.Context, from string, to []string, msg []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(to) == 0 {
		return errors.New("outbox: enqueue: no recipients")
	}
	id, err := messageIDOf(msg)
	if err != nil {
		return fmt.Errorf("outbox: enqueue: %w", err)
	}
	if err := o.store(ctx, id, from, to, msg); err != nil {
		return fmt.Errorf("outbox: enqueue %s: %w", id, err)
	}
	o.nudge()
	return nil
}

// store writes a new queue record unless the message is a duplicate.
func (o *Outbox) store(ctx context.Context, id, from string, to []string, msg []byte) error {
	key := spoolKey(id)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.isDuplicate(key) {
		o.log.InfoContext(ctx, "outbox: duplicate ignored", slog.String("message_id", id))
		return nil
	}
	now := o.cfg.Now()
	m := meta{MessageID: id, From: from, To: slices.Clone(to), Enqueued: now, NextAt: now}
	if err := o.spool.write(queueDir, key, m, msg); err != nil {
		return err
	}
	o.queued[key] = m
	return nil
}

// isDuplicate reports whether key is queued or was delivered recently. o.mu must be held.
func (o *Outbox) isDuplicate(key string) bool {
	if _, ok := o.queued[key]; ok {
		return true
	}
	t, ok := o.spool.sentAt(key)
	return ok && o.cfg.Now().Sub(t) <= sentMemory
}

// nudge wakes Run to look at the queue now.
func (o *Outbox) nudge() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Stats returns current counts.
func (o *Outbox) Stats() Stats {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := Stats{Queued: len(o.queued), Sent: o.sent, Failed: o.failed}
	for _, m := range o.queued {
		if m.Attempts > 0 {
			s.Retrying++
		}
	}
	return s
}

// prune forgets deliveries older than sentMemory, at most once an hour.
func (o *Outbox) prune() error {
	now := o.cfg.Now()
	if !o.lastPrune.IsZero() && now.Sub(o.lastPrune) < time.Hour {
		return nil
	}
	o.lastPrune = now
	return o.spool.pruneSent(now)
}
