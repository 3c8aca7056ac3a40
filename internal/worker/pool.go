package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// Pool runs Config.Workers generic workers in this process.
type Pool struct {
	cfg     Config
	workers []*Worker
	waiting waitingProbe
	avoid   avoidList
	front   frontTable
}

// frontTable is the backend's broker.FrontTable, opened on first use and kept.
type frontTable struct {
	mu    sync.Mutex
	table broker.Table
}

// open returns the front table, or nil (logged) when it cannot be opened now: the queue is
// then opened without its front, and a correction waits its turn.
func (f *frontTable) open(ctx context.Context, b *broker.Backend, log *slog.Logger) broker.Table {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.table != nil || b.Table == nil {
		return f.table
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	t, err := b.Table(ctx, broker.FrontTable)
	if err != nil {
		log.WarnContext(ctx, "open the front table; corrections wait their turn", slog.Any("err", err))
		return nil
	}
	f.table = t
	return t
}

// avoidList holds tenants this process gave up on (their queue kept failing), so that another
// process gets the next claim: one of them may read the queue where this one cannot. Claims
// that come back within leaveWindow of the first one left are left too (a re-request made
// the claim waiting again before anyone else had a turn); one that comes back later found
// no other process to take it (present, but its dispatcher blind or busy), and is taken
// here rather than left again until the avoidance ends.
type avoidList struct {
	mu      sync.Mutex
	tenants map[tenant.ID]avoided
}

type avoided struct {
	until, firstLeft time.Time
}

// leaveWindow is how long claims are left after the first one: longer than the engines'
// default hand-out time (5 s), so that a claim left unacknowledged, waiting again when its
// hand-out ends, is left once more (every dispatcher wakes then, this one among them);
// the one after that, 10 s on, is taken.
const leaveWindow = 8 * time.Second

func (a *avoidList) add(t tenant.ID, until time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tenants == nil {
		a.tenants = map[tenant.ID]avoided{}
	}
	a.tenants[t] = avoided{until: until}
}

// has reports whether t is avoided at now (cheap: ask it before asking who is present).
func (a *avoidList) has(t tenant.ID, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	av, ok := a.tenants[t]
	if ok && !now.Before(av.until) {
		delete(a.tenants, t)
		return false
	}
	return ok
}

// leave reports whether to leave t's claim, handed out now, to another process.
func (a *avoidList) leave(t tenant.ID, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	av, ok := a.tenants[t]
	switch {
	case !ok:
		return false
	case !now.Before(av.until), !av.firstLeft.IsZero() && now.Sub(av.firstLeft) >= leaveWindow:
		delete(a.tenants, t)
		return false
	case av.firstLeft.IsZero():
		av.firstLeft = now
		a.tenants[t] = av
	}
	return true
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

// ErrIdleExit is Run's error when it ended because every worker found nothing to do for
// Config.IdleExit.
var ErrIdleExit = errors.New("worker: idle for the configured time: exiting")

// Run serves tenants until ctx is cancelled, then shuts down gracefully: it stops claiming,
// lets running jobs finish within ShutdownGrace (then interrupts them and hands them back),
// releases every tenant and re-requests claims for tenants with pending work. With
// Config.IdleExit, it does the same on its own once every worker has been idle that long,
// and returns ErrIdleExit.
func (p *Pool) Run(ctx context.Context) error {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var wg sync.WaitGroup
	for _, w := range p.workers {
		wg.Go(func() { w.run(ctx) })
	}
	wg.Go(func() { p.announce(ctx) })
	if p.cfg.IdleExit > 0 {
		wg.Go(func() { p.exitWhenIdle(ctx, stop) })
	}
	wg.Wait()
	p.leave()
	if errors.Is(context.Cause(ctx), ErrIdleExit) {
		return ErrIdleExit
	}
	return nil
}

// exitWhenIdle stops the pool with ErrIdleExit once every worker has been idle for IdleExit.
func (p *Pool) exitWhenIdle(ctx context.Context, stop context.CancelCauseFunc) {
	t := time.NewTicker(min(max(p.cfg.IdleExit/4, 10*time.Millisecond), time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if p.idleFor(now) >= p.cfg.IdleExit {
				p.cfg.Logger.InfoContext(ctx, "idle: exiting", slog.Duration("idle", p.idleFor(now)))
				stop(ErrIdleExit)
				return
			}
		}
	}
}

// idleFor is how long every worker has been idle: the least of their idle times.
func (p *Pool) idleFor(now time.Time) time.Duration {
	least := time.Duration(-1)
	for _, w := range p.workers {
		if d := w.idleFor(now); least < 0 || d < least {
			least = d
		}
	}
	return least
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

// waitingProbe answers "how many claim requests wait for a worker?" for all workers of a
// process, asking the backend at most once per period (and again after a claim taken here).
type waitingProbe struct {
	claims broker.Claims
	every  time.Duration

	mu      sync.Mutex
	checked time.Time
	n       int64 // the last answer
}

func (w *waitingProbe) count(ctx context.Context) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.checked.IsZero() || time.Since(w.checked) >= w.every {
		if n, err := w.claims.Waiting(ctx); err == nil {
			w.n = int64(n)
		}
		w.checked = time.Now()
	}
	return w.n
}

// invalidate makes the next count ask the backend: a worker here just took a claim, so the
// count held is one too many.
func (w *waitingProbe) invalidate() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checked = time.Time{}
}

// need is how many claims wait for a worker beyond this process's idle workers, which take
// waiting claims by themselves: only that many owners here need to hand their tenants back.
func (p *Pool) need(ctx context.Context) int64 {
	n := p.waiting.count(ctx)
	if n == 0 {
		return 0
	}
	for _, w := range p.workers {
		if st := w.standing(); st.state == "idle" {
			n--
		}
	}
	return max(n, 0)
}

// spareTurn reports whether w, whose tenant has nothing to do, is among the need owners here
// whose tenants have had nothing to do the longest (ties by worker id): they hand theirs
// back first; a tenant active a moment ago likely has more work coming.
func (p *Pool) spareTurn(w *Worker, need int64) bool {
	mine := w.standing()
	var ahead int64
	for _, o := range p.workers {
		if o == w {
			continue
		}
		if st := o.standing(); st.spare && (st.since.Before(mine.since) || st.since.Equal(mine.since) && o.id < w.id) {
			ahead++
		}
	}
	return ahead < need
}
