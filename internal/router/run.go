package router

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/metrics"
	"github.com/webordinary/webordinary/internal/retry"
	"github.com/webordinary/webordinary/internal/tenant"
)

// Run runs the reconciler, the expired-lease watcher and the results consumer until ctx ends.
func (r *Router) Run(ctx context.Context) error {
	r.running.Add(1)
	var wg sync.WaitGroup
	wg.Go(func() { r.reconcileLoop(ctx) })
	wg.Go(func() { r.watchExpired(ctx) })
	wg.Go(func() { r.consumeResults(ctx) })
	wg.Wait()
	r.running.Add(-1)
	r.waitNudges()
	return nil
}

func (r *Router) reconcileLoop(ctx context.Context) {
	// Claim requests may have been lost with a restarted engine (they are hints and may live
	// in memory): at start every unowned tenant with pending jobs gets one at once.
	if _, err := r.reconcile(ctx, true); err != nil && ctx.Err() == nil {
		r.log.WarnContext(ctx, "initial reconcile", slog.Any("err", err))
	}
	t := time.NewTicker(r.cfg.ReconcileEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := r.Reconcile(ctx); err != nil && ctx.Err() == nil {
				r.log.WarnContext(ctx, "reconcile", slog.Any("err", err))
			}
		}
	}
}

// Reconcile requests claims for tenants that have pending jobs and no live lease in two
// consecutive passes (a tenant just released is re-requested by its releasing worker), then at
// most once per RepeatClaimAfter while it stays unowned. It returns how many it requested.
func (r *Router) Reconcile(ctx context.Context) (int, error) { return r.reconcile(ctx, false) }

// A pass over part of the inbox (broker.ErrPartial: a shard electing a leader) serves the
// tenants it found and forgets nothing about the others; demand is measured on full passes.
func (r *Router) reconcile(ctx context.Context, all bool) (int, error) {
	pending, err := r.b.Inbox.Tenants(ctx)
	partial := errors.Is(err, broker.ErrPartial)
	if err != nil && !partial {
		return 0, err
	}
	if partial {
		r.log.WarnContext(ctx, "reconcile: part of the inbox does not answer; reconciling the rest", slog.Any("err", err))
	}
	unowned, total := map[tenant.ID]bool{}, 0
	for t, n := range pending {
		total += n
		if _, err := r.b.Leases.Get(ctx, t); errors.Is(err, broker.ErrNotFound) {
			unowned[t] = true
		}
	}
	if !partial {
		metrics.Pending.Set(float64(total))
		metrics.TenantsWaiting.Set(float64(len(unowned)))
		r.measure(len(pending), unowned)
	}
	seen := func(t tenant.ID) bool { _, ok := pending[t]; return ok || !partial }
	return r.requestStuck(ctx, unowned, seen, all)
}

// Demand is the signal an autoscaler needs, as of the reconciler's last pass.
type Demand struct {
	// WorkersWanted is how many workers could be busy now: tenants with pending work (queued
	// or running), owned or not. An owner whose tenant has nothing pending needs no worker:
	// it releases as soon as another tenant waits.
	WorkersWanted int `json:"workersWanted"`
	// TenantsWaiting is how many of those have no owner.
	TenantsWaiting int `json:"tenantsWaiting"`
	// OldestWait is how long the longest-waiting unowned tenant has waited for a worker
	// (from its job's acceptance when the router saw it, else from the first pass that found
	// it unowned); 0 when none waits.
	OldestWait time.Duration `json:"oldestWait"`
	// At is when it was measured.
	At time.Time `json:"at"`
}

// Demand returns the demand measured by the reconciler's last pass (zero before the first).
func (r *Router) Demand() Demand {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.demand
}

// waiting notes that t, unowned, has waited for a worker since at (the earliest note stays).
func (r *Router) waiting(t tenant.ID, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.waitSince[t]; !ok || at.Before(cur) {
		r.waitSince[t] = at
	}
}

// measure updates Demand and its metrics from one reconcile pass.
func (r *Router) measure(withWork int, unowned map[tenant.ID]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	var oldest time.Duration
	for t := range r.waitSince {
		if !unowned[t] {
			delete(r.waitSince, t)
		}
	}
	for t := range unowned {
		since, ok := r.waitSince[t]
		if !ok {
			since = now
			r.waitSince[t] = now
		}
		oldest = max(oldest, now.Sub(since))
	}
	r.demand = Demand{WorkersWanted: withWork, TenantsWaiting: len(unowned), OldestWait: oldest, At: now}
	metrics.WorkersWanted.Set(float64(withWork))
	metrics.OldestWait.Set(oldest.Seconds())
}

// requestStuck requests claims for tenants unowned in two passes in a row. The request is
// dated now: a tenant may have been served between two passes, so an older date could put it
// before tenants that waited longer (a request still waiting keeps its place anyway).
// seen says whether this pass saw t (all tenants, on a full pass): what the last passes
// noted about tenants it did not see is kept.
func (r *Router) requestStuck(ctx context.Context, unowned map[tenant.ID]bool, seen func(tenant.ID) bool, all bool) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, now := 0, time.Now()
	for t := range unowned {
		if !all && (!r.unowned[t] || now.Sub(r.lastAsks[t]) < r.cfg.RepeatClaimAfter) {
			continue
		}
		if err := r.b.Claims.Request(ctx, t, now); err != nil {
			return n, err
		}
		r.log.InfoContext(ctx, "reconciler: claim requested for unowned tenant with pending jobs", slog.String("tenant", t.String()))
		r.lastAsks[t] = now
		n++
	}
	for t := range r.lastAsks {
		if !unowned[t] && seen(t) {
			delete(r.lastAsks, t)
		}
	}
	for t := range r.unowned {
		if !seen(t) {
			unowned[t] = true
		}
	}
	r.unowned = unowned
	return n, nil
}

// watchExpired requests a claim as soon as a lease runs out on a tenant with pending jobs.
func (r *Router) watchExpired(ctx context.Context) {
	for ctx.Err() == nil {
		ch, err := r.b.Leases.Expired(ctx)
		if err != nil || ch == nil {
			_ = retry.Sleep(ctx, time.Second)
			continue
		}
		for t := range ch {
			r.claimIfPending(ctx, t)
		}
	}
}

// claimIfPending requests a claim for t, whose lease expired, unless it has nothing pending.
// A count that fails (the shard electing a leader after a node loss) requests it too: a
// claim for a tenant with nothing to do is let go by its worker, while a missing one waits
// for the reconciler's two passes (TestAnExpiredLeaseIsClaimedWhenPendingCannotBeCounted).
func (r *Router) claimIfPending(ctx context.Context, t tenant.ID) {
	n, err := r.b.Inbox.Pending(ctx, t)
	if err == nil && n == 0 {
		return
	}
	r.log.InfoContext(ctx, "lease expired with jobs pending (or not counted); claim requested", slog.String("tenant", t.String()), slog.Any("countErr", err))
	// Its owner vanished with work pending: that work has waited longer than anyone's.
	if err := r.b.Claims.Request(ctx, t, time.Time{}); err != nil {
		r.log.WarnContext(ctx, "claim after expiry; the reconciler will follow up", slog.Any("err", err))
	}
}

// resultLanes is how many results are handled at once: a tenant's results always take the
// same lane (by hash), so they are handled in order. Lanes hold no queue: a result waits only
// while its own lane is busy, so few results sit fetched and unacknowledged (their ack wait
// running) behind a slow reply (pictures, a mail relay).
const resultLanes = 8

func (r *Router) consumeResults(ctx context.Context) {
	var wg sync.WaitGroup
	lanes := make([]chan broker.ResultDelivery, resultLanes)
	for i := range lanes {
		lanes[i] = make(chan broker.ResultDelivery)
		wg.Go(func() {
			for d := range lanes[i] {
				r.handleResult(ctx, d)
			}
		})
	}
	defer func() {
		for _, l := range lanes {
			close(l)
		}
		wg.Wait()
	}()
	for ctx.Err() == nil {
		d, err := r.b.Results.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.log.WarnContext(ctx, "next result", slog.Any("err", err))
				_ = retry.Sleep(ctx, time.Second)
			}
			continue
		}
		select {
		case lanes[laneOf(d.Result().Tenant)] <- d:
		case <-ctx.Done(): // not acked: delivered again after the results' ack wait
		}
	}
}

func laneOf(t tenant.ID) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(t.String()))
	return int(h.Sum32() % resultLanes)
}

func (r *Router) handleResult(ctx context.Context, d broker.ResultDelivery) {
	res := d.Result()
	log := r.log.With(slog.String("tenant", res.Tenant.String()), slog.String("job", res.JobID))
	var err error
	if rd, ok := d.(broker.RecordedResult); !ok || !rd.Recorded() {
		res, err = r.recordResult(ctx, res)
	}
	if err == nil && r.cfg.OnResult != nil {
		err = r.cfg.OnResult(ctx, res)
	}
	switch {
	case err != nil && d.Attempt() < maxResultAttempts:
		log.WarnContext(ctx, "handle result; will be delivered again", slog.Int("attempt", d.Attempt()), slog.Any("err", err))
		return
	case err != nil: // a result that can never be handled must not hold up everyone's replies
		log.ErrorContext(ctx, "giving up on a result after repeated failures", slog.Int("attempt", d.Attempt()), slog.Any("err", err))
	case r.cfg.OnResult == nil:
		log.InfoContext(ctx, "result", slog.String("state", string(res.State)), slog.Duration("duration", res.Duration))
	}
	_ = d.Ack(ctx)
}

// maxResultAttempts bounds redeliveries of a result whose handling keeps failing (about
// 10 minutes at the results consumer's 30 s AckWait).
const maxResultAttempts = 20

// recordResult makes the job's record final from its result when the record lags (records
// persist asynchronously, the results stream does not), and returns the result to act on.
// handleResult skips it for a result whose backend knows the record holds it already
// (broker.RecordedResult).
// When the record is already final, that is the result the record holds, not the message's
// copy: the record was written by the lease holder's fenced write, while on a backend without
// a conditional send a message can be sent after its sender's lease ran out, so a message
// only ever makes the router act on what a fenced write stored.
func (r *Router) recordResult(ctx context.Context, res broker.Result) (broker.Result, error) {
	final := res
	_, err := r.b.Jobs.Update(ctx, res.JobID, func(rec *broker.JobRecord) error {
		if rec.State.Final() {
			if rec.Result != nil && rec.Result.JobID == res.JobID {
				final = *rec.Result
			}
			return errAlreadyFinal
		}
		rec.State, rec.FinishedAt, rec.Result = res.State, res.FinishedAt, &res
		rec.LastError = res.Error
		return nil
	})
	if errors.Is(err, broker.ErrNotFound) && res.Job != nil { // lost with an engine crash: rebuild it
		err = r.b.Jobs.Create(ctx, broker.JobRecord{Job: *res.Job, State: res.State, Attempts: res.Attempt,
			Worker: res.Worker, LeaseToken: res.LeaseToken, FinishedAt: res.FinishedAt, LastError: res.Error, Result: &res})
		if errors.Is(err, broker.ErrExists) {
			return r.recordResult(ctx, res)
		}
	}
	if errors.Is(err, errAlreadyFinal) || errors.Is(err, broker.ErrNotFound) {
		return final, nil
	}
	return final, err
}

var errAlreadyFinal = errors.New("record already final")
