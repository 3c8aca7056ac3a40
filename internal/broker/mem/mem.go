package mem

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
)

// ErrClosed is returned by every call on a client that was closed, or whose Engine was.
var ErrClosed = errors.New("mem: backend closed")

// Defaults of Config; they match natsjs.Config's.
const (
	DefaultClaimAckWait   = 5 * time.Second
	DefaultResultAckWait  = 30 * time.Second
	DefaultDedupWindow    = 2 * time.Minute
	DefaultMaxMessageSize = 64 << 20
	DefaultMaxBlobSize    = 64 << 20
)

// Config tunes an Engine. A zero or negative field takes its default; tests set short waits.
type Config struct {
	// ClaimAckWait is how long a received claim request may stay unacknowledged before another
	// worker gets it. Default 5s.
	ClaimAckWait time.Duration
	// ResultAckWait is the same for results. Default 30s.
	ResultAckWait time.Duration
	// DedupWindow bounds idempotent Publish of jobs and results: an id published again within
	// it is not queued again. Default 2m.
	DedupWindow time.Duration
	// MaxMessageSize is the largest job or result accepted, JSON-encoded; a larger one is
	// broker.ErrTooLarge. Default 64 MB, what the embedded NATS server takes.
	MaxMessageSize int
	// MaxBlobSize is the largest blob accepted; a larger one is broker.ErrTooLarge.
	// Default broker.MaxBlobSize.
	MaxBlobSize int
}

func (c Config) withDefaults() Config {
	if c.ClaimAckWait <= 0 {
		c.ClaimAckWait = DefaultClaimAckWait
	}
	if c.ResultAckWait <= 0 {
		c.ResultAckWait = DefaultResultAckWait
	}
	if c.DedupWindow <= 0 {
		c.DedupWindow = DefaultDedupWindow
	}
	if c.MaxMessageSize <= 0 {
		c.MaxMessageSize = DefaultMaxMessageSize
	}
	if c.MaxBlobSize <= 0 {
		c.MaxBlobSize = DefaultMaxBlobSize
	}
	return c
}

// Engine is the shared in-memory state: queues, leases, records, tables. Safe for concurrent use.
type Engine struct {
	cfg      Config
	inbox    *inboxStore
	claims   *claimTable
	results  *ackQueue[[]byte]
	leases   *leaseStore
	jobs     *jobStore
	presence *presenceStore
	signals  *signalHub
	tables   *tableStore
	blobs    *blobStore

	mu     sync.Mutex
	conns  map[*conn]struct{}
	closed bool
}

// NewEngine returns an empty engine.
func NewEngine(cfg Config) *Engine {
	cfg = cfg.withDefaults()
	return &Engine{
		cfg:      cfg,
		inbox:    newInboxStore(cfg.DedupWindow),
		claims:   newClaimTable(),
		results:  newAckQueue[[]byte](cfg.ResultAckWait, cfg.DedupWindow),
		leases:   newLeaseStore(),
		jobs:     newJobStore(),
		presence: newPresenceStore(),
		signals:  newSignalHub(),
		tables:   newTableStore(),
		blobs:    newBlobStore(),
		conns:    map[*conn]struct{}{},
	}
}

// New returns a backend on a new engine of its own; its Close closes the engine.
func New(cfg Config) *broker.Backend {
	e := NewEngine(cfg)
	b := e.Connect()
	b.Close = e.Close
	return b
}

// Connect returns a new client of e. Its Close cuts only this client: its calls return
// ErrClosed, its interrupt watches and expiry subscriptions end, and what it had received and
// not settled is delivered again as after a crash (queue deliveries to the tenant's next
// Open, claims and results after their ack wait).
func (e *Engine) Connect() *broker.Backend {
	c := &conn{e: e, done: make(chan struct{})}
	c.claims = broker.NewClaims(claimStore{c}, broker.ClaimsConfig{AckWait: e.cfg.ClaimAckWait})
	e.mu.Lock()
	if e.closed {
		close(c.done)
	} else {
		e.conns[c] = struct{}{}
	}
	e.mu.Unlock()
	return &broker.Backend{
		Inbox:    &inbox{c: c},
		Claims:   c.claims,
		Leases:   newLeases(c),
		Results:  &results{c: c},
		Signals:  &signals{c: c},
		Jobs:     &jobs{c: c},
		Presence: &presence{c: c},
		Table:    c.table,
		Blobs:    c.blobs,
		Close:    c.close,
	}
}

// Close closes every client and stops every timer. The state is dropped with the engine.
// Idempotent.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	conns := e.conns
	e.conns = nil
	e.mu.Unlock()
	for c := range conns {
		_ = c.close()
	}
	e.leases.close()
	return nil
}

// conn is one client of an engine.
type conn struct {
	e      *Engine
	claims *broker.SharedClaims
	done   chan struct{} // closed by close
	once   sync.Once
}

func (c *conn) close() error {
	c.once.Do(func() {
		c.e.mu.Lock()
		delete(c.e.conns, c)
		c.e.mu.Unlock()
		select {
		case <-c.done: // born closed: the engine was closed before Connect
		default:
			close(c.done)
		}
		c.e.leases.dropConn(c)
		c.e.signals.dropConn(c)
		c.claims.Close(ErrClosed)
	})
	return nil
}

// check is the start of every call: a done ctx returns ctx.Err() unwrapped, a closed client
// ErrClosed.
func (c *conn) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-c.done:
		return ErrClosed
	default:
		return nil
	}
}

// wait blocks until changed is closed, until passes (zero: no limit), ctx ends (ctx.Err()) or
// the client closes (ErrClosed).
func (c *conn) wait(ctx context.Context, changed <-chan struct{}, until time.Time) error {
	var timeout <-chan time.Time
	if !until.IsZero() {
		t := time.NewTimer(time.Until(until))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-changed:
		return nil
	case <-timeout:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return ErrClosed
	}
}

// notifier wakes every waiter at once: a waiter takes ch under its store's lock, and a change
// closes it (also under that lock).
type notifier struct{ ch chan struct{} }

func (n *notifier) wait() <-chan struct{} {
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

func (n *notifier) fire() {
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}

// dedupWindow remembers ids published within a window. Not safe for concurrent use: its
// owner's lock guards it.
type dedupWindow struct {
	window time.Duration
	seen   map[string]time.Time
	order  []dedupEntry
}

type dedupEntry struct {
	id string
	at time.Time
}

func newDedupWindow(window time.Duration) *dedupWindow {
	return &dedupWindow{window: window, seen: map[string]time.Time{}}
}

// add records id at now and reports whether it is new within the window.
func (d *dedupWindow) add(id string, now time.Time) bool {
	d.prune(now)
	if _, dup := d.seen[id]; dup {
		return false
	}
	d.seen[id] = now
	d.order = append(d.order, dedupEntry{id, now})
	return true
}

func (d *dedupWindow) prune(now time.Time) {
	n := 0
	for n < len(d.order) && now.Sub(d.order[n].at) >= d.window {
		delete(d.seen, d.order[n].id)
		n++
	}
	d.order = d.order[n:]
}
