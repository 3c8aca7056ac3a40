package worker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
)

// Pool runs Config.Workers generic workers in this process.
type Pool struct {
	cfg     Config
	workers []*Worker
	waiting waitingProbe
}

// New validates cfg and returns a pool ready to Run.
func New(cfg Config) (*Pool, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Pool{cfg: cfg}
	p.waiting = waitingProbe{claims: cfg.Backend.Claims, every: 50 * time.Millisecond}
	for i := range cfg.Workers {
		p.workers = append(p.workers, &Worker{id: fmt.Sprintf("%s-w%d", cfg.Process, i+1), cfg: cfg, pool: p})
	}
	return p, nil
}

// Run serves tenants until ctx is cancelled, then shuts down gracefully: it stops claiming,
// lets running jobs finish within ShutdownGrace (then interrupts them and hands them back),
// releases every tenant and re-requests claims for tenants with pending work.
func (p *Pool) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, w := range p.workers {
		wg.Go(func() { w.run(ctx) })
	}
	wg.Go(func() { p.announce(ctx) })
	wg.Wait()
	p.leave()
	return nil
}

// Status reports every worker's current state.
func (p *Pool) Status() []broker.WorkerInfo {
	out := make([]broker.WorkerInfo, 0, len(p.workers))
	for _, w := range p.workers {
		out = append(out, w.info())
	}
	return out
}

func (p *Pool) announce(ctx context.Context) {
	t := time.NewTicker(p.cfg.Heartbeat)
	defer t.Stop()
	for {
		for _, w := range p.workers {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.Heartbeat)
			_ = p.cfg.Backend.Presence.Announce(actx, w.info(), p.cfg.LeaseTTL)
			cancel()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *Pool) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, w := range p.workers {
		_ = p.cfg.Backend.Presence.Leave(ctx, w.id)
	}
}

// waitingProbe answers "are claim requests waiting for a worker?" for all workers of a
// process, asking the backend at most once per period.
type waitingProbe struct {
	claims broker.Claims
	every  time.Duration

	mu      sync.Mutex
	checked time.Time
	n       atomic.Int64
}

func (w *waitingProbe) any(ctx context.Context) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if time.Since(w.checked) >= w.every {
		if n, err := w.claims.Waiting(ctx); err == nil {
			w.n.Store(int64(n))
		}
		w.checked = time.Now()
	}
	return w.n.Load() > 0
}
