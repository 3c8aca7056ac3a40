package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/metrics"
	"github.com/webordinary/webordinary/internal/tenant"
	"github.com/webordinary/webordinary/internal/worker"
)

// starts is a no-op processor that reports when each job started.
type starts struct {
	mu   sync.Mutex
	at   map[string]time.Time
	ch   chan string
	work time.Duration
	runs []run
}

type run struct {
	t          tenant.ID
	start, end time.Time
}

func newStarts(work time.Duration) *starts {
	return &starts{at: map[string]time.Time{}, ch: make(chan string, 100000), work: work}
}

func (s *starts) Process(ctx context.Context, task worker.Task) (worker.Outcome, error) {
	now := time.Now()
	s.mu.Lock()
	s.at[task.Job.ID] = now
	s.mu.Unlock()
	s.ch <- task.Job.ID
	if s.work > 0 {
		time.Sleep(s.work)
	}
	s.mu.Lock()
	s.runs = append(s.runs, run{t: task.Job.Tenant, start: now, end: time.Now()})
	s.mu.Unlock()
	return worker.Outcome{}, nil
}

// first is when the first job started here; zero before any.
func (s *starts) first() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first time.Time
	for _, at := range s.at {
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first
}

func (s *starts) started(id string, within time.Duration) (time.Time, error) {
	deadline := time.After(within)
	for {
		select {
		case got := <-s.ch:
			if got == id {
				s.mu.Lock()
				defer s.mu.Unlock()
				return s.at[id], nil
			}
		case <-deadline:
			return time.Time{}, fmt.Errorf("%w: job %s within %s", errNoStart, id, within)
		}
	}
}

// dispatch measures accepted → processor started: warm (the tenant's owner is waiting for
// its next job) and cold (no owner; an idle worker takes the claim).
func dispatch(ctx context.Context, cfg Config) error {
	for _, mode := range []string{"warm", "cold"} {
		lat, err := dispatchOnce(ctx, cfg, mode == "warm")
		if err != nil {
			return err
		}
		fmt.Fprintf(cfg.Out, "dispatch %-4s  n=%d  p50=%s  p99=%s  max=%s\n", mode, len(lat),
			round(percentile(lat, 0.50)), round(percentile(lat, 0.99)), round(percentile(lat, 1)))
	}
	return nil
}

func dispatchOnce(ctx context.Context, cfg Config, warm bool) ([]time.Duration, error) {
	r, err := newRig(ctx, cfg, false)
	if err != nil {
		return nil, err
	}
	defer r.close()
	s := newStarts(0)
	idle := time.Hour
	if !warm {
		idle = time.Nanosecond // release as soon as the queue is empty, so every job is a claim
	}
	stop, err := r.pool(ctx, worker.Config{Workers: 1, Processor: s, IdleRelease: idle})
	if err != nil {
		return nil, err
	}
	defer stop()
	var lat []time.Duration
	for i := range cfg.Samples + 10 {
		t := tid("warm", 0)
		if !warm {
			t = tid("cold", i)
		}
		t0 := time.Now()
		rec, err := r.submit(ctx, t, "x")
		if err != nil {
			return nil, err
		}
		at, err := s.started(rec.Job.ID, 10*time.Second)
		if err != nil {
			return nil, err
		}
		if err := r.awaitResults(ctx, 1, 10*time.Second); err != nil {
			return nil, err
		}
		if i >= 10 { // warm-up
			lat = append(lat, at.Sub(t0))
		}
		if warm {
			time.Sleep(5 * time.Millisecond) // let the owner settle the last job and wait for the next
		} else {
			waitIdle(ctx, r.b, t)
		}
	}
	return lat, nil
}

// waitIdle waits until t's lease is gone, so the next cold sample finds the worker idle.
func waitIdle(ctx context.Context, b *broker.Backend, t tenant.ID) {
	for range 1000 {
		if _, err := b.Leases.Get(ctx, t); err != nil {
			return
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// throughput: tenants × jobs on Config.Workers workers in this process and as many in a second one, measured
// two ways: end to end (submitting while the workers run) and drain (all jobs accepted first,
// then the workers start).
func throughput(ctx context.Context, cfg Config) error {
	for _, shape := range [][2]int{{100, 20}, {1000, 1}} {
		for _, drain := range []bool{false, true} {
			if err := throughputOnce(ctx, cfg, shape[0], shape[1], drain); err != nil {
				return err
			}
		}
	}
	return nil
}

func throughputOnce(ctx context.Context, cfg Config, tenants, jobs int, drain bool) error {
	r, err := newRig(ctx, cfg, true)
	if err != nil {
		return err
	}
	defer r.close()
	n := tenants * jobs
	use := engineNow(r.srv)
	var submitted time.Duration
	if drain {
		start := time.Now()
		if err := submitAll(ctx, r, tenants, jobs); err != nil {
			return err
		}
		submitted = time.Since(start)
	}
	// A drain starts with the pools, and may end before they are both up.
	busy := cpuBusy()
	claimsBefore := counter("webordinary_claims_total", "acquired")
	jobsBefore := counter("webordinary_jobs_total", "")
	stop, here, err := startTwo(ctx, cfg, r)
	if err != nil {
		return err
	}
	defer stop()
	if !drain {
		busy = cpuBusy()
	}
	start := time.Now()
	if !drain {
		if err := submitAll(ctx, r, tenants, jobs); err != nil {
			return err
		}
		submitted = time.Since(start)
	}
	if err := r.awaitResults(ctx, n, 5*time.Minute); err != nil {
		return err
	}
	if first := here.first(); drain && !first.IsZero() && first.Before(start) {
		// The pool here starts first and drains while the other process starts: time the
		// drain from its first job, as the River bench does.
		start = first
	}
	took := time.Since(start)
	cpu := busy()
	if cpu != "" {
		cpu = "; " + cpu
	}
	mode := "end to end"
	if drain {
		mode = "drain     "
	}
	claims, ran := counter("webordinary_claims_total", "acquired")-claimsBefore, counter("webordinary_jobs_total", "")-jobsBefore
	fmt.Fprintf(cfg.Out, "throughput %4d tenants x %2d jobs, %d workers in 2 processes, %s: %6.0f jobs/s (%d jobs in %s; submit %.0f/s; %.2f claims per job here%s)\n",
		tenants, jobs, 2*cfg.Workers, mode, float64(n)/took.Seconds(), n, round(took), float64(n)/submitted.Seconds(), claims/max(ran, 1), cpu)
	fmt.Fprintf(cfg.Out, "  %s\n", perJob(use, engineNow(r.srv), n))
	return nil
}

// counter sums this process's counter name over the series whose label value is value (any
// when empty).
func counter(name, value string) float64 {
	families, _ := metrics.Registry.Gather()
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if value == "" || (len(m.GetLabel()) > 0 && m.GetLabel()[0].GetValue() == value) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// startTwo starts Config.Workers workers here and as many in a second process, and waits
// until all have announced. here records the starts of the jobs run here.
func startTwo(ctx context.Context, cfg Config, r *rig) (stop func(), here *starts, err error) {
	here = newStarts(0)
	stopLocal, err := r.pool(ctx, worker.Config{Workers: cfg.Workers, Processor: here})
	if err != nil {
		return nil, nil, err
	}
	child, err := startWorkerProcess(cfg, r, cfg.Workers, "noop", 0) // the default lease, as the pool here
	if err != nil {
		stopLocal()
		return nil, nil, err
	}
	stop = func() { stopProcess(child); stopLocal() }
	if err := waitWorkers(ctx, r.b, 2*cfg.Workers); err != nil {
		stop()
		return nil, nil, err
	}
	return stop, here, nil
}

// submitAll submits jobs round-robin over tenants from 8 goroutines, each tenant's jobs in order.
func submitAll(ctx context.Context, r *rig, tenants, jobs int) error {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for j := range jobs {
				for i := g; i < tenants; i += 8 {
					if _, err := r.submit(ctx, tid("tp", i), fmt.Sprint(j)); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// startWorkerProcess starts a worker process with workers workers and the given lease TTL
// (0: the default).
func startWorkerProcess(cfg Config, r *rig, workers int, agent string, lease time.Duration) (*exec.Cmd, error) {
	args := []string{"worker", "--nats", r.url, "--workers", fmt.Sprint(workers), "--set", "worker.processor=noop", "--log-level", "error"}
	if lease > 0 {
		args = append(args, "--set", "worker.lease_ttl="+lease.String())
	}
	if agent != "noop" {
		args = append(args, "--set", "worker.agent_command="+agent, "--set", "worker.processor=command")
	}
	cmd := exec.Command(cfg.Self, args...)
	cmd.Env = append(os.Environ(), "WO_NATS_USER="+r.user, "WO_NATS_PASSWORD="+r.password) // not in ps
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker process %s: %w", cfg.Self, err)
	}
	return cmd, nil
}

func stopProcess(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// waitWorkers waits until n workers have announced themselves.
func waitWorkers(ctx context.Context, b *broker.Backend, n int) error {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		ws, _ := b.Presence.List(ctx)
		if len(ws) >= n {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("fewer than %d workers announced within 15s", n)
}

// failover: a worker process owning a tenant mid-job is killed with SIGKILL; how long until
// the job runs again on another worker?
func failover(ctx context.Context, cfg Config) error {
	r, err := newRig(ctx, cfg, true)
	if err != nil {
		return err
	}
	defer r.close()
	child, err := startWorkerProcess(cfg, r, 1, "sleep 600", cfg.LeaseTTL)
	if err != nil {
		return err
	}
	defer stopProcess(child)
	if err := waitWorkers(ctx, r.b, 1); err != nil {
		return err
	}
	t := tid("failover", 0)
	rec, err := r.submit(ctx, t, "x")
	if err != nil {
		return err
	}
	if err := waitState(ctx, r.b, rec.Job.ID, broker.StateRunning); err != nil {
		return err
	}
	s := newStarts(0)
	stop, err := r.pool(ctx, worker.Config{Workers: 1, Processor: s, LeaseTTL: cfg.LeaseTTL})
	if err != nil {
		return err
	}
	defer stop()
	killed := time.Now()
	_ = child.Process.Kill()
	at, err := s.started(rec.Job.ID, 4*cfg.LeaseTTL+10*time.Second)
	if err != nil {
		return err
	}
	took := at.Sub(killed)
	fmt.Fprintf(cfg.Out, "failover after kill -9: %s with lease TTL %s (%.2f x TTL)\n", round(took), cfg.LeaseTTL, took.Seconds()/cfg.LeaseTTL.Seconds())
	return nil
}

func waitState(ctx context.Context, b *broker.Backend, id string, want broker.State) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err := b.Jobs.Wait(ctx, id, func(r broker.JobRecord) bool { return r.State == want })
	if err != nil {
		return fmt.Errorf("job %s never became %s: %w", id, want, err)
	}
	return nil
}

// fairness: 2 workers, 3 tenants with 20 jobs of 100 ms each; the longest time any tenant
// had work and nothing running.
func fairness(ctx context.Context, cfg Config) error {
	r, err := newRig(ctx, cfg, false)
	if err != nil {
		return err
	}
	defer r.close()
	const job = 100 * time.Millisecond
	s := newStarts(job)
	stop, err := r.pool(ctx, worker.Config{Workers: 2, Processor: s})
	if err != nil {
		return err
	}
	defer stop()
	start := time.Now()
	for j := range 20 {
		for i := range 3 {
			if _, err := r.submit(ctx, tid("fair", i), fmt.Sprint(j)); err != nil {
				return err
			}
		}
	}
	if err := r.awaitResults(ctx, 60, 2*time.Minute); err != nil {
		return err
	}
	worst, who := maxWait(s, start)
	fmt.Fprintf(cfg.Out, "fairness 2 workers, 3 busy tenants, %s jobs: max wait %s (%s); target <= one job + 1s\n", job, round(worst), who)
	return nil
}

// maxWait is the longest gap in any tenant's runs (including before its first), while it
// still had jobs pending.
func maxWait(s *starts, start time.Time) (time.Duration, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := map[tenant.ID]time.Time{}
	var worst time.Duration
	var who string
	for _, rn := range s.runs { // appended at each run's end; starts are ordered per tenant
		prev, ok := last[rn.t]
		if !ok {
			prev = start
		}
		if gap := rn.start.Sub(prev); gap > worst {
			worst, who = gap, rn.t.String()
		}
		last[rn.t] = rn.end
	}
	return worst, who
}

func round(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	}
	return strings.TrimSpace(fmt.Sprintf("%.2fs", d.Seconds()))
}
