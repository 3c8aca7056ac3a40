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
)

// Config configures an Outbox.
type Config struct {
	// Dir is the spool directory, created if missing. Required without Engine. Only one
	// Outbox (in one process) may use a directory at a time. With Engine, Dir is a spool an
	// earlier serve may have left: Open moves what it queued into the engine.
	Dir string
	// Engine, when set, keeps the outbox in the engine every serve shares instead of Dir:
	// any number of Outboxes on one engine, in any processes, send each message once.
	Engine *Engine
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
	case c.Engine != nil:
		if err := c.Engine.validate(); err != nil {
			return err
		}
	case c.Dir == "":
		return errors.New("outbox: Dir (or Engine) is required")
	}
	switch {
	case c.Sender == nil:
		return errors.New("outbox: Sender is required")
	case c.MaxAttempts < 1:
		return fmt.Errorf("outbox: MaxAttempts %d must be at least 1", c.MaxAttempts)
	}
	return nil
}

// Outbox is a durable queue of composed messages, kept in a spool directory or in the engine
// (Config.Engine). Enqueue stores a message; Run delivers it, retrying temporary failures
// with exponential backoff and parking permanent or exhausted ones (failed/ or the engine's
// outbox_failed table) with their error. Delivery is at least once: a crash between sending
// and updating the store sends the message again after restart, under the same Message-ID.
//
// All methods are safe for concurrent use.
type Outbox struct {
	cfg     Config
	keep    store
	log     *slog.Logger
	wake    chan struct{}
	running atomic.Bool

	mu        sync.Mutex
	queued    map[string]meta // by spool key
	sent      uint64
	failed    int
	lastPrune time.Time
	nextScan  time.Time // when Run reads the store again (shared stores only)
}

// Stats is a snapshot for metrics.
type Stats struct {
	// Queued is how many messages wait in the spool, including those retrying (gauge).
	Queued int
	// Retrying is how many queued messages failed at least once (gauge).
	Retrying int
	// Sent is how many messages this Outbox delivered since Open (counter).
	Sent uint64
	// Failed is how many messages are parked, including earlier runs' (gauge).
	Failed int
}

// Open opens the outbox. With a Dir it creates the spool if needed and loads what a previous
// process left queued; unreadable queue records are moved to failed/ with a .corrupt suffix.
// With an Engine it reads nothing yet: Run starts by reading the engine's queue.
func Open(cfg Config) (*Outbox, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	o := &Outbox{cfg: cfg, log: cfg.Logger, wake: make(chan struct{}, 1), queued: map[string]meta{}}
	if cfg.Engine != nil {
		keep := newEngineStore(cfg.Engine, cfg.Now, cfg.Logger)
		o.keep = keep
		if cfg.Dir != "" {
			ctx, cancel := context.WithTimeout(context.Background(), adoptTimeout)
			defer cancel()
			if err := adopt(ctx, keep, cfg.Dir, cfg.Now(), cfg.Logger); err != nil {
				return nil, fmt.Errorf("outbox: move the replies queued in %s into the engine: %w", cfg.Dir, err)
			}
		}
		return o, nil
	}
	d := diskStore{spool: spool{cfg.Dir}, log: cfg.Logger}
	o.keep = d
	if err := d.init(); err != nil {
		return nil, fmt.Errorf("outbox: open spool %s: %w", cfg.Dir, err)
	}
	var err error
	if o.queued, o.failed, err = d.load(context.Background()); err != nil {
		return nil, fmt.Errorf("outbox: open spool %s: %w", cfg.Dir, err)
	}
	if err := o.prune(context.Background()); err != nil {
		return nil, fmt.Errorf("outbox: open spool %s: %w", cfg.Dir, err)
	}
	return o, nil
}

// Enqueue stores msg for delivery to the envelope recipients to, with from as the envelope
// sender. It returns once the message is durably stored (in the spool or the engine). msg
// must carry a Message-ID ([ErrNoMessageID] otherwise); enqueueing a Message-ID that is already
// queued, or was delivered in the last 24 hours, is a no-op. Enqueue does not wait for
// delivery.
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
	added, err := o.keep.add(ctx, key, m, msg)
	if err != nil {
		return err
	}
	if !added {
		o.log.InfoContext(ctx, "outbox: duplicate ignored", slog.String("message_id", id))
		return nil
	}
	o.queued[key] = m
	return nil
}

// isDuplicate reports whether key is queued here. o.mu must be held.
func (o *Outbox) isDuplicate(key string) bool {
	_, ok := o.queued[key]
	return ok
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
func (o *Outbox) prune(ctx context.Context) error {
	now := o.cfg.Now()
	if !o.lastPrune.IsZero() && now.Sub(o.lastPrune) < time.Hour {
		return nil
	}
	o.lastPrune = now
	return o.keep.prune(ctx, now)
}
