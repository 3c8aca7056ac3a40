package mem

import (
	"context"
	"sync"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// signalHub fans interrupts out to the watchers of a tenant, best effort like core NATS: a
// watcher whose buffer is full misses the signal, and nobody watching means nobody hears it.
// Sends happen under the lock, so once stop returns nothing more arrives. Channels are never
// closed (a closed channel would read as an endless stream of empty interrupts).
type signalHub struct {
	mu       sync.Mutex
	watchers map[tenant.ID]map[*watcher]struct{}
}

type watcher struct {
	c  *conn
	ch chan broker.Interrupt
}

// watchBuffer is how many interrupts a watcher holds for a slow reader.
const watchBuffer = 16

func newSignalHub() *signalHub {
	return &signalHub{watchers: map[tenant.ID]map[*watcher]struct{}{}}
}

func (h *signalHub) remove(t tenant.ID, w *watcher) {
	delete(h.watchers[t], w)
	if len(h.watchers[t]) == 0 {
		delete(h.watchers, t)
	}
}

// dropConn ends c's watches.
func (h *signalHub) dropConn(c *conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for t, ws := range h.watchers {
		for w := range ws {
			if w.c == c {
				h.remove(t, w)
			}
		}
	}
}

type signals struct{ c *conn }

var _ broker.Signals = (*signals)(nil)

func (s *signals) Interrupt(ctx context.Context, t tenant.ID, in broker.Interrupt) error {
	if err := s.c.check(ctx); err != nil {
		return err
	}
	h := s.c.e.signals
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.watchers[t] {
		select {
		case w.ch <- in:
		default: // a full buffer already holds an interrupt; more say nothing new
		}
	}
	return nil
}

// Watch delivers t's interrupts until stop is called or the client closes; ctx bounds only
// the call itself.
func (s *signals) Watch(ctx context.Context, t tenant.ID) (<-chan broker.Interrupt, func(), error) {
	h := s.c.e.signals
	w := &watcher{c: s.c, ch: make(chan broker.Interrupt, watchBuffer)}
	h.mu.Lock()
	defer h.mu.Unlock()
	// Checked under the lock: a client closing now either finds this watcher in dropConn or
	// has closed done already.
	if err := s.c.check(ctx); err != nil {
		return nil, nil, err
	}
	if h.watchers[t] == nil {
		h.watchers[t] = map[*watcher]struct{}{}
	}
	h.watchers[t][w] = struct{}{}
	stop := func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.remove(t, w)
	}
	return w.ch, stop, nil
}
