package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/metrics"
	"github.com/webordinary/webordinary/internal/retry"
	"github.com/webordinary/webordinary/internal/tenant"
)

// Worker is one generic worker: it serves one tenant at a time.
type Worker struct {
	id   string
	cfg  Config
	pool *Pool

	mu        sync.Mutex
	state     string
	lease     broker.Lease
	job       string
	idleSince time.Time // when it last stopped running a job (zero while it runs one)
	spare     bool      // owns a tenant with nothing to do (drained or idle)
}

func (w *Worker) info() broker.WorkerInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	info := broker.WorkerInfo{ID: w.id, Process: w.cfg.Process, State: w.state, JobID: w.job, Sandbox: w.cfg.Sandbox, Heartbeat: time.Now()}
	if w.lease.Token != 0 {
		info.Tenant, info.LeaseToken = w.lease.Tenant.String(), w.lease.Token
	}
	return info
}

func (w *Worker) set(state string, lease broker.Lease, job string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case state == "running":
		w.idleSince = time.Time{}
	case w.idleSince.IsZero():
		w.idleSince = time.Now()
	}
	w.state, w.lease, w.job = state, lease, job
	if state != "owning" {
		w.spare = false
	}
}

// setSpare records whether the tenant this worker owns has nothing to do.
func (w *Worker) setSpare(spare bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.spare = spare
}

// standing is what the pool weighs when claims wait: the worker's state, whether its tenant
// has nothing to do, and since when it has run no job.
type standing struct {
	state string
	spare bool
	since time.Time
}

func (w *Worker) standing() standing {
	w.mu.Lock()
	defer w.mu.Unlock()
	return standing{state: w.state, spare: w.spare, since: w.idleSince}
}

// idleFor is how long the worker has run no job (0 while it runs one). Owning a tenant that
// has nothing queued is idle: an exit releases it like any shutdown.
func (w *Worker) idleFor(now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.idleSince.IsZero() {
		return 0
	}
	return now.Sub(w.idleSince)
}

func (w *Worker) log() *slog.Logger { return w.cfg.Logger.With(slog.String("worker", w.id)) }

// run takes claims until ctx ends.
func (w *Worker) run(ctx context.Context) {
	w.set("idle", broker.Lease{}, "")
	for ctx.Err() == nil {
		c, err := w.cfg.Backend.Claims.Next(ctx)
		w.pool.waiting.invalidate() // one fewer waits now
		if err != nil {
			if ctx.Err() == nil {
				w.log().ErrorContext(ctx, "receive claim", slog.Any("err", err))
				_ = retry.Sleep(ctx, time.Second)
			}
			continue
		}
		w.serveClaim(ctx, c)
		w.set("idle", broker.Lease{}, "")
	}
	w.set("stopped", broker.Lease{}, "")
}

// othersPresent reports whether a worker of another process is alive (to leave a claim to).
func (w *Worker) othersPresent(ctx context.Context) bool {
	ws, err := w.cfg.Backend.Presence.List(ctx)
	if err != nil {
		return false
	}
	for _, o := range ws {
		if o.Process != w.cfg.Process {
			return true
		}
	}
	return false
}

// serveClaim acquires the claimed tenant unless it has no work or another owner; the claim
// is acknowledged only after the decision, so a crash here leaves it to be delivered again.
// Shutdown does not cut a decision short (a lease acquired under a cancelled context would
// still be written): once begun, it is taken with its own deadline, and a tenant acquired as
// shutdown begins is handed back at once by its ownership.
func (w *Worker) serveClaim(shutdown context.Context, c broker.Claim) {
	if shutdown.Err() != nil {
		// Not decided: asking again makes it waiting at once (rather than after its
		// hand-out time), for a worker that stays — this one is leaving (shutdown, idle exit).
		ctx, cancel := context.WithTimeout(context.WithoutCancel(shutdown), claimDecision)
		defer cancel()
		_ = w.cfg.Backend.Claims.Request(ctx, c.Tenant(), c.RequestedAt())
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(shutdown), claimDecision)
	defer cancel()
	t := c.Tenant()
	log := w.log().With(slog.String("tenant", t.String()))
	b := w.cfg.Backend
	if w.pool.avoid.has(t, time.Now()) && w.othersPresent(ctx) && w.pool.avoid.leave(t, time.Now()) {
		// Left unacknowledged: after its hand-out time anyone may take it, another
		// process first with luck (this one gave the tenant up a moment ago); if it comes
		// back here, it is taken.
		metrics.Claims.WithLabelValues("avoided").Inc()
		log.InfoContext(ctx, "leaving the claim to another process: this one could not read the tenant's queue")
		return
	}
	if n, err := b.Inbox.Pending(ctx, t); err == nil && n == 0 {
		_ = c.Ack(ctx)
		metrics.Claims.WithLabelValues("no_work").Inc()
		return
	}
	lease, err := w.acquire(ctx, t)
	if err != nil && !errors.Is(err, broker.ErrLeaseHeld) {
		// Not acknowledged: the request is handed out again after its hand-out time, when
		// the engine may answer again. Acknowledged, it would be gone, and the reconciler
		// asks again only after RepeatClaimAfter.
		metrics.Claims.WithLabelValues("error").Inc()
		log.ErrorContext(ctx, "acquire lease", slog.Any("err", err))
		return
	}
	_ = c.Ack(ctx)
	if err != nil {
		metrics.Claims.WithLabelValues("held").Inc()
		log.DebugContext(ctx, "claim dropped: the tenant's lease is live (its owner serves it)")
		return
	}
	cancel()
	metrics.Claims.WithLabelValues("acquired").Inc()
	if at := c.RequestedAt(); !at.IsZero() {
		metrics.ClaimWait.Observe(time.Since(at).Seconds())
	}
	metrics.LeasesHeld.Inc()
	defer metrics.LeasesHeld.Dec()
	log.DebugContext(shutdown, "claimed", slog.Uint64("token", lease.Token))
	newOwnership(w, lease).run(shutdown)
}

// acquire takes t's lease, asking again while the engine does not answer (retry.Do: a
// cluster that lost a node electing the leases' leader, "no response from stream") until
// ctx ends. A request that took the lease though its answer was lost leaves the lease held
// by this worker, which no one else can take until it expires: a later try finds it so, and
// it is adopted (TestALeaseTakenWithoutAnAnswerIsAdopted).
func (w *Worker) acquire(ctx context.Context, t tenant.ID) (lease broker.Lease, err error) {
	b, tries := w.cfg.Backend, 0
	err = retry.Do(ctx, func(ctx context.Context) (err error) {
		tries++
		lease, err = b.Leases.Acquire(ctx, t, w.id, w.cfg.LeaseTTL)
		if errors.Is(err, broker.ErrLeaseHeld) && tries > 1 {
			if l, gerr := b.Leases.Get(ctx, t); gerr == nil && l.Owner == w.id {
				lease = l // this worker serves one tenure at a time: no other uses this lease
				return nil
			}
		}
		return err
	}, func(err error) bool { return errors.Is(err, broker.ErrLeaseHeld) }, func(err error) {
		w.log().WarnContext(ctx, "acquire lease; asking again", slog.String("tenant", t.String()), slog.Any("err", err))
	})
	return lease, err
}

// claimDecision bounds deciding on one claim (pending count, lease, acknowledgement).
const claimDecision = 10 * time.Second
