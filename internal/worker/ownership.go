package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/metrics"
	"github.com/webordinary/webordinary/internal/retry"
	"github.com/webordinary/webordinary/internal/tenant"
)

// briefWait is the wait for a next job while other tenants wait for a worker: long enough for
// the last job's ack to be processed and the next message delivered.
const briefWait = 10 * time.Millisecond

// ownership is one worker's tenure of one tenant, from acquire to release.
type ownership struct {
	w   *Worker
	b   *broker.Backend
	log *slog.Logger

	ctx    context.Context // cancelled with broker.ErrLeaseLost when the lease is lost
	cancel context.CancelCauseFunc

	claimedAt    time.Time
	lastJob      time.Time
	idle         bool
	drained      bool        // the last job had nothing queued behind it
	heldBack     bool        // the last job was handed back to the queue (Retry), to come again
	jobs         int         // jobs started in this tenure (not counting re-settled ones)
	releaseAsked atomic.Bool // an operator asked for the tenant to be released
	failingSince time.Time   // when Next began failing without a break; zero when it works
	stuck        bool        // released because Next kept failing

	// tenant and token never change during a tenure; lease (its version and expiry) does,
	// under mu.
	tenant tenant.ID
	token  uint64
	fence  *broker.Fence // the tenure's writes, conditioned on its lease
	mu     sync.Mutex
	lease  broker.Lease
	cur    *current
	// queue is the tenant's open queue, for promoting a correction (set before interrupts
	// are watched).
	queue broker.Queue
}

type current struct {
	id     string
	thread string
	d      broker.Delivery
	cancel context.CancelCauseFunc
}

func newOwnership(w *Worker, lease broker.Lease) *ownership {
	now := time.Now()
	return &ownership{w: w, b: w.cfg.Backend, lease: lease, tenant: lease.Tenant, token: lease.Token, fence: broker.NewFence(w.cfg.Backend, lease), claimedAt: now, lastJob: now,
		log: w.log().With(slog.String("tenant", lease.Tenant.String()), slog.Uint64("token", lease.Token))}
}

// run serves the tenant until release; shutdown is the pool's context.
func (o *ownership) run(shutdown context.Context) {
	o.ctx, o.cancel = context.WithCancelCause(context.WithoutCancel(shutdown))
	defer o.cancel(nil)
	o.w.set("owning", o.leaseNow(), "")
	hbStop, hbDone := make(chan struct{}), make(chan struct{})
	go o.heartbeat(hbStop, hbDone)
	q, err := o.openQueue(shutdown)
	if err != nil {
		o.log.ErrorContext(o.ctx, "open tenant queue; giving the tenant up", slog.Any("err", err))
		o.stuck = true // hand it to anyone, another process first
		o.w.pool.avoid.add(o.tenant, time.Now().Add(o.stuckAfter()))
		_ = retry.Sleep(o.ctx, time.Second) // the engine is failing: do not spin through claims
	} else {
		o.serve(shutdown, q)
	}
	close(hbStop)
	<-hbDone
	o.release(q, shutdown.Err() == nil && !o.stuck && !o.leftEmpty())
}

// leftEmpty reports whether the tenant is left with nothing to do, as far as this owner
// knows: its last read found nothing, or its last job had nothing behind it, and that job
// is not held back to come again.
func (o *ownership) leftEmpty() bool { return (o.idle || o.drained) && !o.heldBack }

// openQueue opens the tenant's queue, trying again for up to OpenRetryFor while the engine
// cannot (retry.Do). The lease is renewed meanwhile; a tenant given up at the first failure
// waited for a process that could take it, and after a node loss the others are often blind
// (TestOwnerTriesItsQueueAgainWhileTheEngineElects).
func (o *ownership) openQueue(shutdown context.Context) (q broker.Queue, err error) {
	front := o.w.pool.front.open(o.ctx, o.b, o.log) // once per pool, outside the open's retries
	ctx, cancel := context.WithTimeout(o.ctx, o.w.cfg.OpenRetryFor)
	defer cancel()
	err = retry.Do(ctx, func(ctx context.Context) (err error) {
		q, err = broker.OpenQueue(ctx, o.b.Inbox, front, o.tenant, broker.QueueOptions{AckWait: o.w.cfg.LeaseTTL})
		return err
	}, func(error) bool { return shutdown.Err() != nil }, func(err error) {
		o.log.WarnContext(o.ctx, "open tenant queue; trying again", slog.Any("err", err))
	})
	return q, err
}

// stuckAfter is how long Next may fail without a break before the tenant is released.
func (o *ownership) stuckAfter() time.Duration {
	return max(5*time.Second, 3*o.w.cfg.LeaseTTL)
}

func (o *ownership) serve(shutdown context.Context, q broker.Queue) {
	o.queue = q
	in, stop, err := o.b.Signals.Watch(o.ctx, o.tenant)
	if err != nil {
		o.log.WarnContext(o.ctx, "watch interrupts; jobs will run to the end", slog.Any("err", err))
	} else {
		defer stop()
		go o.interrupts(in)
	}
	for o.ctx.Err() == nil && shutdown.Err() == nil {
		o.w.setSpare(o.idle || o.drained)
		need := o.w.pool.need(o.ctx)
		if o.shouldRelease(shutdown, need) {
			return
		}
		wait := o.w.cfg.PollWait
		if need > 0 {
			wait = min(briefWait, wait) // others wait: a tenant with no job at hand is released soon
		}
		d, err := q.Next(o.ctx, wait)
		switch {
		case errors.Is(err, broker.ErrNoMessage):
			o.idle, o.failingSince = true, time.Time{}
		case err != nil:
			if o.ctx.Err() == nil {
				o.log.ErrorContext(o.ctx, "next job", slog.Any("err", err))
				if o.failingSince.IsZero() {
					o.failingSince = time.Now()
				}
				if stuck := time.Since(o.failingSince); stuck >= o.stuckAfter() {
					// Renewing a lease while unable to read the tenant's jobs would hold them
					// forever: hand the tenant back (to anyone: not warm) to start afresh.
					o.log.WarnContext(o.ctx, "the tenant's queue keeps failing: releasing it", slog.Duration("for", stuck))
					metrics.Releases.WithLabelValues("stuck").Inc()
					o.stuck = true
					o.w.pool.avoid.add(o.tenant, time.Now().Add(2*o.stuckAfter()))
					return
				}
				_ = retry.Sleep(o.ctx, 100*time.Millisecond)
			}
		default:
			o.idle, o.drained, o.heldBack, o.failingSince = false, d.Behind() == 0, false, time.Time{}
			if !o.runJob(shutdown, d) {
				return
			}
			o.lastJob = time.Now()
		}
	}
}

// shouldRelease: idle for IdleRelease, or other tenants wait for a worker (need of them beyond
// this process's idle workers) while this one has had its quantum, or is idle or drained and
// among the need owners here whose tenants have had nothing to do the longest.
func (o *ownership) shouldRelease(ctx context.Context, need int64) bool {
	cfg := o.w.cfg
	if o.releaseAsked.Load() {
		metrics.Releases.WithLabelValues("operator").Inc()
		return true
	}
	if o.idle && o.jobs == 0 && o.nothingPending(ctx) {
		// The claim found nothing to do (a stale request, or the last job's ack was still in
		// flight when its owner released): hand the tenant back rather than sit on it.
		metrics.Releases.WithLabelValues("empty").Inc()
		return true
	}
	if o.idle && time.Since(o.lastJob) >= cfg.IdleRelease {
		o.log.InfoContext(ctx, "releasing idle tenant", slog.Duration("idle", time.Since(o.lastJob)))
		metrics.Releases.WithLabelValues("idle").Inc()
		return true
	}
	spare := o.idle || o.drained
	if need > 0 && (!spare && time.Since(o.claimedAt) >= cfg.Quantum || spare && o.w.pool.spareTurn(o.w, need)) {
		o.log.DebugContext(ctx, "releasing early: other tenants are waiting")
		metrics.Releases.WithLabelValues("early").Inc()
		return true
	}
	return false
}

// nothingPending reports whether the tenant has no job pending, or has had its queue for
// longer than stuckAfter without a delivery. A queue may be late to deliver a job that is
// there: a consumer just made while a cluster elected leaders, when natsjs's queues were consumers
// (TestAClaimWithJobsPendingIsNotReleasedAsEmpty). A count that fails says nothing: not yet.
func (o *ownership) nothingPending(ctx context.Context) bool {
	if time.Since(o.claimedAt) >= o.stuckAfter() {
		return true
	}
	n, err := o.b.Inbox.Pending(ctx, o.tenant)
	return err == nil && n == 0
}

func (o *ownership) heartbeat(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	hb := o.w.cfg.Heartbeat
	t := time.NewTicker(hb)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-o.ctx.Done():
			return
		case <-t.C:
			if !o.renew(hb) {
				return
			}
		}
	}
}

// renew extends the lease and the running job's delivery. It reports false once the lease is
// lost: on ErrLeaseLost, or when a failed renewal leaves too little time for another try,
// so the worker stops before its lease can expire under it.
func (o *ownership) renew(hb time.Duration) bool {
	o.mu.Lock()
	old, cur := o.lease, o.cur
	o.mu.Unlock()
	margin := hb / 4 // act before the lease can expire under us
	ctx, cancel := context.WithDeadline(o.ctx, old.ExpiresAt.Add(-margin))
	defer cancel()
	l, err := o.b.Leases.Renew(ctx, old)
	if err == nil {
		o.mu.Lock()
		o.lease = l
		o.mu.Unlock()
		if cur != nil {
			_ = cur.d.Extend(ctx)
		}
		return true
	}
	if errors.Is(err, broker.ErrLeaseLost) || time.Until(old.ExpiresAt) <= hb+margin {
		o.lose(err)
		return false
	}
	o.log.WarnContext(ctx, "lease renewal failed; will retry", slog.Any("err", err))
	return true
}

func (o *ownership) lose(err error) {
	o.log.WarnContext(o.ctx, "lease lost; stopping at once", slog.Any("err", err))
	metrics.Releases.WithLabelValues("lost").Inc()
	o.cancel(broker.ErrLeaseLost)
}

func (o *ownership) lost() bool { return o.ctx.Err() != nil }

// leaseNow is the current lease (renewals replace it).
func (o *ownership) leaseNow() broker.Lease {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lease
}

func (o *ownership) interrupts(in <-chan broker.Interrupt) {
	for {
		select {
		case <-o.ctx.Done():
			return
		case sig := <-in:
			o.interrupt(sig)
		}
	}
}

func (o *ownership) interrupt(sig broker.Interrupt) {
	if sig.Release {
		o.log.InfoContext(o.ctx, "release requested", slog.String("reason", sig.Reason))
		o.releaseAsked.Store(true)
		return
	}
	o.mu.Lock()
	cur := o.cur
	o.mu.Unlock()
	if cur == nil || sig.JobID != cur.id && !cur.supersededBy(sig) {
		return
	}
	if cur.supersededBy(sig) {
		o.promote(sig)
	}
	o.log.InfoContext(o.ctx, "interrupting job", slog.String("job", cur.id), slog.String("reason", sig.Reason))
	metrics.Interrupts.Inc()
	cur.cancel(&InterruptError{By: sig.Before, Reason: sig.Reason})
}

// promote puts the correction that interrupts the running job at the front of the tenant's
// queue, before the job is stopped, so it runs next, ahead of other threads' jobs queued
// before it. Without it (too large to travel with the signal, or the front not writable now)
// the correction waits its turn.
func (o *ownership) promote(sig broker.Interrupt) {
	if sig.Job == nil || sig.Job.ID != sig.Before || sig.Job.Tenant != o.tenant {
		return
	}
	ctx, cancel := context.WithTimeout(o.ctx, 10*time.Second)
	defer cancel()
	if ok, err := broker.Promote(ctx, o.queue, *sig.Job); err != nil || !ok {
		o.log.WarnContext(ctx, "the correction waits its turn", slog.String("job", sig.Job.ID), slog.Bool("front", ok), slog.Any("err", err))
	}
}

// supersededBy reports whether sig names a newer job that takes over from this one: accepted
// later and, when sig names a thread, on the same thread.
func (c *current) supersededBy(sig broker.Interrupt) bool {
	return sig.Before != "" && c.id < sig.Before && (sig.Thread == "" || sig.Thread == c.thread)
}

// checkLease is Task.CheckLease: ours only if not lost locally and the stored lease still
// carries our fencing token.
func (o *ownership) checkLease(ctx context.Context) error {
	if o.lost() {
		return broker.ErrLeaseLost
	}
	l, err := o.b.Leases.Get(ctx, o.tenant)
	if err != nil && !errors.Is(err, broker.ErrNotFound) {
		return err
	}
	if err != nil || l.Token != o.token {
		o.lose(broker.ErrLeaseLost) // someone else owns the tenant now: stop everything
		return broker.ErrLeaseLost
	}
	return nil
}

// release hands the tenant back: its queue, then the warm hint when warm, then lease
// (compare-and-delete), then a claim request when jobs are still pending. A lost lease is not
// ours to touch. The hint is left out when this process is leaving, and for a tenant left with
// nothing to do (its last read found nothing, or its last job had nothing behind it): its
// next job seldom comes within WarmFor, and the hint is a claim write that every process's
// watch reads (TestATenantLeftWithNothingToDoIsNotMarkedWarm).
func (o *ownership) release(q broker.Queue, warm bool) {
	if o.lost() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t := o.tenant
	if q != nil {
		if err := q.Close(ctx); err != nil {
			o.log.WarnContext(ctx, "close tenant queue", slog.Any("err", err))
		}
	}
	if warm && o.w.cfg.WarmFor > 0 {
		// Before the lease goes: a request made once it is gone already prefers us.
		if err := broker.Warm(ctx, o.b.Claims, t, time.Now().Add(o.w.cfg.WarmFor)); err != nil {
			o.log.WarnContext(ctx, "warm hint", slog.Any("err", err))
		}
	}
	o.mu.Lock()
	lease := o.lease
	o.mu.Unlock()
	if err := o.b.Leases.Release(ctx, lease); err != nil {
		o.log.WarnContext(ctx, "release lease", slog.Any("err", err))
	}
	n, err := o.b.Inbox.Pending(ctx, t)
	if err != nil || n > 0 {
		if err := o.b.Claims.Request(ctx, t, time.Now()); err != nil {
			o.log.ErrorContext(ctx, "re-request claim; the reconciler will", slog.Any("err", err))
		}
	}
}
