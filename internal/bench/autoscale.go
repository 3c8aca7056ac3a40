package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/broker/natsjs"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/tenant"
	"github.com/webordinary/webordinary/internal/worker"
)

// The autoscale case's workload (issue 12): 60 tenants, 3 editing sessions a day each within
// the working day, 1–6 instructions per session, each sent after the owner read the previous
// reply, jobs of about 2 minutes; a scaler that starts one-worker pools from the router's
// demand signal and pools that exit after idling. Time runs scaleFactor times faster.
const (
	scaleFactor      = 600 // one real second is ten simulated minutes
	scaleTenants     = 60
	scaleSessions    = 3
	scaleDay         = 12 * time.Hour // sessions start within it
	scaleIdleExit    = time.Minute
	scaleTick        = 3 * time.Second  // how often the scaler reads the demand
	scaleWaitTrigger = 15 * time.Second // start pools for waiting tenants after this wait
	scaleMaxReplicas = 30
	// scalePollWait is how often an owner with nothing queued looks whether others wait:
	// 100ms real by default, which this clock would stretch to a simulated minute.
	scalePollWait = 10 * time.Millisecond // 6 simulated seconds
)

// sim converts a simulated duration to real time.
func sim(d time.Duration) time.Duration { return d / scaleFactor }

// simulated converts a real duration to simulated time.
func simulated(d time.Duration) time.Duration { return d * scaleFactor }

// autoscale runs the workload and prints worker-hours against work-hours and the wait from
// acceptance to start.
func autoscale(ctx context.Context, cfg Config) error {
	// The router's safety nets run on simulated time too (a lost claim is asked again after
	// 30 simulated seconds, not 30 real ones: 5 simulated hours).
	r, err := newRigWith(ctx, cfg, false, router.Config{ReconcileEvery: sim(3 * time.Second), RepeatClaimAfter: sim(30 * time.Second)})
	if err != nil {
		return err
	}
	defer r.close()
	w := &simWork{done: map[string]chan struct{}{}, accepted: map[string]time.Time{}}
	sc := &scaler{r: r, w: w}
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { sc.run(sctx) })
	start := time.Now()
	var sessions sync.WaitGroup
	errs := make(chan error, scaleTenants*scaleSessions)
	for i := range scaleTenants {
		for range scaleSessions {
			at := time.Duration(rand.Int64N(int64(scaleDay)))
			sessions.Go(func() { errs <- w.session(ctx, r, tid("scale", i), sim(at)) })
		}
	}
	sessions.Wait()
	stop()
	wg.Wait()
	sc.stopAll()
	close(errs)
	if err := errors.Join(collect(errs)...); err != nil {
		return err
	}
	sc.report(cfg, w, time.Since(start))
	return nil
}

func collect(errs <-chan error) []error {
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}

// simWork is the processor (a job takes 1.5–2.5 simulated minutes) and the record of waits.
type simWork struct {
	mu       sync.Mutex
	done     map[string]chan struct{}
	accepted map[string]time.Time
	waits    []time.Duration
	work     time.Duration
}

func (w *simWork) Process(ctx context.Context, task worker.Task) (worker.Outcome, error) {
	now := time.Now()
	d := sim(90*time.Second + time.Duration(rand.Int64N(int64(time.Minute))))
	w.mu.Lock()
	if at, ok := w.accepted[task.Job.ID]; ok {
		w.waits = append(w.waits, now.Sub(at))
		delete(w.accepted, task.Job.ID)
	}
	w.mu.Unlock()
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return worker.Outcome{}, context.Cause(ctx)
	}
	w.mu.Lock()
	w.work += time.Since(now)
	if ch, ok := w.done[task.Job.ID]; ok {
		close(ch)
		delete(w.done, task.Job.ID)
	}
	w.mu.Unlock()
	return worker.Outcome{}, nil
}

// session waits until its start, then sends 1–6 instructions, each 1–5 simulated minutes
// after the previous one finished (the owner reads the reply and writes the next).
func (w *simWork) session(ctx context.Context, r *rig, t tenant.ID, at time.Duration) error {
	time.Sleep(at)
	for i := range 1 + rand.IntN(6) {
		if i > 0 {
			time.Sleep(sim(time.Minute + time.Duration(rand.Int64N(int64(4*time.Minute)))))
		}
		if err := w.instruct(ctx, r, t); err != nil {
			return err
		}
	}
	return nil
}

// instruct submits one instruction and waits until its job has run.
func (w *simWork) instruct(ctx context.Context, r *rig, t tenant.ID) error {
	w.mu.Lock() // held across the submit: the job cannot start before it is registered
	rec, err := r.submit(ctx, t, "edit")
	if err != nil {
		w.mu.Unlock()
		return err
	}
	ch := make(chan struct{})
	w.done[rec.Job.ID], w.accepted[rec.Job.ID] = ch, rec.Job.AcceptedAt
	w.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-time.After(sim(2 * time.Hour)):
		return fmt.Errorf("job %s for %s not done within 2 simulated hours", rec.Job.ID, t)
	}
}

// scaler starts one-worker pools while the demand is above the running pools; pools stop
// themselves after scaleIdleExit without a job.
type scaler struct {
	r *rig
	w *simWork

	mu       sync.Mutex
	running  int
	spawned  []time.Time // when each pool was asked for, for the wait trigger
	started  int
	lifetime time.Duration // summed over pools that exited
	cancels  []context.CancelFunc
	cold     []time.Duration
	wg       sync.WaitGroup
}

func (s *scaler) run(ctx context.Context) {
	t := time.NewTicker(sim(scaleTick))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := s.r.router.Reconcile(ctx); err != nil {
			continue
		}
		d := s.r.router.Demand()
		want := min(d.WorkersWanted, scaleMaxReplicas)
		s.mu.Lock()
		starting := s.recent(time.Now().Add(-sim(scaleWaitTrigger))) // every tick: forgets old ones
		add := want - s.running
		if d.OldestWait > sim(scaleWaitTrigger) {
			// Someone waits although the count says enough: pools on their way out are
			// counted until they exit. The second trigger, like KEDA's on the oldest wait,
			// less the pools asked for within the trigger's window: they are still starting.
			add = max(add, d.TenantsWaiting-starting)
		}
		add = min(add, scaleMaxReplicas-s.running)
		s.running += max(add, 0)
		for range add {
			s.spawned = append(s.spawned, time.Now())
		}
		s.mu.Unlock()
		for range add {
			s.wg.Go(func() { s.pool(ctx) })
		}
	}
}

// recent is how many pools were asked for since since; it forgets older ones. s.mu is held.
func (s *scaler) recent(since time.Time) int {
	i := 0
	for i < len(s.spawned) && s.spawned[i].Before(since) {
		i++
	}
	s.spawned = s.spawned[i:]
	return len(s.spawned)
}

// pool runs one one-worker pool on its own connection until it exits idle (or ctx ends).
func (s *scaler) pool(ctx context.Context) {
	begin := time.Now()
	nc, err := natsjs.ConnectInProcess(s.r.srv, s.r.user, s.r.password)
	if err != nil {
		s.exited(begin)
		return
	}
	defer nc.Close()
	b, err := natsjs.New(ctx, nc, natsjs.Config{})
	if err != nil {
		s.exited(begin)
		return
	}
	defer b.Close()
	p, err := worker.New(worker.Config{Backend: b, Workers: 1, Processor: s.w, Logger: quiet(),
		IdleExit: sim(scaleIdleExit), PollWait: scalePollWait, WarmFor: sim(worker.DefaultWarmFor), LeaseTTL: 15 * time.Second})
	if err != nil {
		s.exited(begin)
		return
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.begin(cancel, time.Since(begin))
	_ = p.Run(pctx)
	cancel()
	s.exited(begin)
}

func (s *scaler) begin(cancel context.CancelFunc, cold time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started++
	s.cancels = append(s.cancels, cancel)
	s.cold = append(s.cold, cold)
}

func (s *scaler) exited(begin time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	s.lifetime += time.Since(begin)
}

// stopAll stops the pools still running (their time counts) and waits for them.
func (s *scaler) stopAll() {
	s.mu.Lock()
	cancels := s.cancels
	s.mu.Unlock()
	for _, c := range cancels {
		c()
	}
	s.wg.Wait()
}

func (s *scaler) report(cfg Config, w *simWork, took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	workH, workerH := simulated(w.work).Hours(), simulated(s.lifetime).Hours()
	fmt.Fprintf(cfg.Out, "autoscale %d tenants x %d sessions in %s, 1-6 instructions, jobs 1.5-2.5 min, %dx scaled time (%s real): %d jobs\n",
		scaleTenants, scaleSessions, scaleDay, scaleFactor, round(took), len(w.waits))
	fmt.Fprintf(cfg.Out, "autoscale work-hours %.1f, worker-hours %.1f (%.2fx; idle exit %s); %d pools started, cold start p50 %s (simulated %s)\n",
		workH, workerH, workerH/max(workH, 1e-9), scaleIdleExit, s.started,
		round(percentile(s.cold, 0.5)), round(simulated(percentile(s.cold, 0.5))))
	fmt.Fprintf(cfg.Out, "autoscale wait accepted -> started (simulated): p50 %s, p95 %s, max %s; target p95 <= 30s + cold start\n",
		round(simulated(percentile(w.waits, 0.5))), round(simulated(percentile(w.waits, 0.95))), round(simulated(percentile(w.waits, 1))))
}
