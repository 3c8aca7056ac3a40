// Package bench measures the control plane with a no-op processor: dispatch latency (warm and
// cold), throughput across two worker processes, failover after kill -9, and fairness.
// It runs a real embedded JetStream (fsync on every write unless NoSync) in a temp directory.
package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/natsjs"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/tenant"
	"github.com/webordinary/webordinary/internal/worker"
)

// Config configures a bench run.
type Config struct {
	// Out receives the report.
	Out io.Writer
	// Self is the webordinary binary started for the second worker process; default os.Executable().
	Self string
	// Samples per dispatch measurement. Default 300.
	Samples int
	// LeaseTTL for the failover case. Default 5s.
	LeaseTTL time.Duration
	// Workers per process in the throughput case (two processes). Default 8.
	Workers int
	// NoSync relaxes fsync (to compare).
	NoSync bool
	// Only runs the named cases (dispatch, throughput, failover, fairness, autoscale); empty =
	// all but autoscale (a scaled-time day, about 80s).
	Only []string
}

func (c Config) withDefaults() Config {
	if c.Out == nil {
		c.Out = os.Stdout
	}
	if c.Self == "" {
		c.Self, _ = os.Executable()
	}
	if c.Samples == 0 {
		c.Samples = 300
	}
	if c.Workers == 0 {
		c.Workers = 8
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 5 * time.Second
	}
	return c
}

// Run runs the cases and prints their figures.
func Run(ctx context.Context, cfg Config) error {
	cfg = cfg.withDefaults()
	cases := []struct {
		name string
		run  func(context.Context, Config) error
	}{
		{"dispatch", dispatch}, {"throughput", throughput}, {"failover", failover}, {"fairness", fairness},
		{"autoscale", autoscale},
	}
	for _, c := range cases {
		if len(cfg.Only) > 0 && !slices.Contains(cfg.Only, c.name) || len(cfg.Only) == 0 && c.name == "autoscale" {
			continue
		}
		if err := c.run(ctx, cfg); err != nil {
			return fmt.Errorf("bench %s: %w", c.name, err)
		}
	}
	return nil
}

// rig is one embedded engine with a router and an in-process pool.
type rig struct {
	dir string
	srv *server.Server
	url string
	// user and password are the engine's credentials.
	user, password string
	b              *broker.Backend
	router         *router.Router
	results        chan broker.Result
	cancel         context.CancelFunc
	wg             sync.WaitGroup
	closers        []func()
}

func newRig(ctx context.Context, cfg Config, listen bool) (*rig, error) {
	return newRigWith(ctx, cfg, listen, router.Config{})
}

// newRigWith is newRig with the router's timings of rc (zero: defaults).
func newRigWith(ctx context.Context, cfg Config, listen bool, rc router.Config) (*rig, error) {
	dir, err := os.MkdirTemp("", "wo-bench-")
	if err != nil {
		return nil, err
	}
	// The engine never listens without credentials; worker processes get them by environment.
	scfg := natsjs.ServerConfig{Dir: dir, NoSync: cfg.NoSync, User: "bench", Password: rand.Text()}
	if listen {
		scfg.Listen = "127.0.0.1:-1"
	}
	srv, err := natsjs.StartServer(scfg)
	if err != nil {
		return nil, err
	}
	r := &rig{dir: dir, srv: srv, url: srv.ClientURL(), user: scfg.User, password: scfg.Password, results: make(chan broker.Result, 100000)}
	r.closers = append(r.closers, func() { srv.Shutdown(); srv.WaitForShutdown(); _ = os.RemoveAll(dir) })
	if r.b, err = r.connect(ctx); err != nil {
		r.close()
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	rc.Backend, rc.Logger = r.b, quiet()
	rc.Policy = func(context.Context, tenant.ID) router.Policy { return router.PolicyQueue }
	rc.OnResult = func(_ context.Context, res broker.Result) error {
		select {
		case r.results <- res:
		default: // nobody counts results (the autoscale case)
		}
		return nil
	}
	r.router, err = router.New(rc)
	if err != nil {
		r.close()
		return nil, err
	}
	r.wg.Go(func() { _ = r.router.Run(rctx) })
	return r, nil
}

func (r *rig) connect(ctx context.Context) (*broker.Backend, error) {
	nc, err := natsjs.ConnectInProcess(r.srv, r.user, r.password)
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, nc.Close)
	return natsjs.New(ctx, nc, natsjs.Config{EngineID: r.srv.ID()}) // as serve's
}

// pool starts an in-process pool; stop waits for it.
func (r *rig) pool(ctx context.Context, cfg worker.Config) (stop func(), err error) {
	nc, err := natsjs.ConnectInProcess(r.srv, r.user, r.password)
	if err != nil {
		return nil, err
	}
	b, err := natsjs.New(ctx, nc, natsjs.Config{})
	if err != nil {
		nc.Close()
		return nil, err
	}
	cfg.Backend, cfg.Logger = b, quiet()
	p, err := worker.New(cfg)
	if err != nil {
		nc.Close()
		return nil, err
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(pctx) }()
	return func() { cancel(); <-done; nc.Close() }, nil
}

func (r *rig) close() {
	if r.cancel != nil {
		r.cancel()
	}
	r.wg.Wait()
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

func (r *rig) submit(ctx context.Context, t tenant.ID, instruction string) (broker.JobRecord, error) {
	return r.router.Submit(ctx, router.Request{Project: t.Project, User: t.User, Thread: "bench", Instruction: instruction})
}

// awaitResults waits for n results.
func (r *rig) awaitResults(ctx context.Context, n int, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for i := range n {
		select {
		case <-r.results:
		case <-ctx.Done():
			return fmt.Errorf("only %d of %d results within %s", i, n, within)
		}
	}
	return nil
}

func quiet() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

func tid(p string, i int) tenant.ID { return tenant.ID{Project: p, User: fmt.Sprintf("u%d", i)} }

// percentile returns the q-quantile of sorted d.
func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(float64(len(d))*q))]
}

var errNoStart = errors.New("processor did not start")
