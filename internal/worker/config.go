package worker

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
)

// Defaults of Config's fields (also the flags' defaults in cmd/webordinary).
const (
	DefaultLeaseTTL      = 15 * time.Second
	DefaultIdleRelease   = 30 * time.Minute
	DefaultQuantum       = 500 * time.Millisecond
	DefaultPollWait      = 100 * time.Millisecond
	DefaultOpenRetryFor  = 12 * time.Second
	DefaultMaxAttempts   = 3
	DefaultShutdownGrace = 10 * time.Second
	// DefaultWarmFor is like Temporal's sticky queue: its schedule-to-start fallback is 5s.
	DefaultWarmFor = 5 * time.Second
	// MinLeaseTTL is the shortest LeaseTTL accepted.
	MinLeaseTTL = time.Second
)

// Config configures a pool of workers in one process.
type Config struct {
	// Backend provides every broker port. Required.
	Backend *broker.Backend
	// Processor does each job's work. Required.
	Processor Processor
	// Workers is how many tenants this process serves at once. Default 1.
	Workers int
	// Process names this process in worker ids; default host-pid.
	Process string
	// Sandbox describes how jobs' code is isolated, for presence (status and dashboard).
	Sandbox string
	// LeaseTTL is how long a lease lives without renewal; a crashed worker's tenants move
	// after about this long. Default 15s, minimum 1s.
	LeaseTTL time.Duration
	// Heartbeat is the renewal period. Default LeaseTTL/3.
	Heartbeat time.Duration
	// IdleRelease releases a tenant that had no job for this long. Default 30m.
	IdleRelease time.Duration
	// Quantum is how long a worker may keep a busy tenant while other tenants wait for a
	// worker; it then releases after the current job (work-conserving). Default 500ms.
	Quantum time.Duration
	// MaxAttempts sends a job to the dead-letter queue after this many failed runs, or after
	// twice as many starts that never finished (a job that crashes its workers). Default 3.
	MaxAttempts int
	// RetryBackoff is the delay before the second attempt, doubled for each later one. Default 1s.
	RetryBackoff time.Duration
	// ShutdownGrace is how long a running job may finish after shutdown begins before it is
	// interrupted and handed back. Default 10s.
	ShutdownGrace time.Duration
	// WarmFor is how long a released tenant's next claim goes first to this process, whose
	// workspace for it is warm (only on backends that offer broker.WarmClaims), before any
	// process may take it. Default 5s; negative: off.
	WarmFor time.Duration
	// PollWait bounds one wait for the owned tenant's next job, so an owner with nothing
	// queued looks again this often whether other tenants wait for a worker (and releases to
	// them). A job published during the wait is delivered at once. Default 100ms.
	PollWait time.Duration
	// OpenRetryFor is how long an owner tries again to open its tenant's queue before it
	// gives the tenant up to another process: a cluster that lost a node answers nothing
	// until it has elected new leaders (up to about 9 s). Default 12s.
	OpenRetryFor time.Duration
	// IdleExit ends Run (with ErrIdleExit, after the usual graceful shutdown) once no worker
	// of the process has run a job for this long (owning a tenant with nothing queued counts
	// as idle): the platform's scaler may then scale to zero. 0: never.
	IdleExit time.Duration
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Workers == 0 {
		c.Workers = 1
	}
	if c.Process == "" {
		host, _ := os.Hostname()
		c.Process = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = c.LeaseTTL / 3
	}
	if c.IdleRelease == 0 {
		c.IdleRelease = DefaultIdleRelease
	}
	if c.Quantum == 0 {
		c.Quantum = DefaultQuantum
	}
	if c.PollWait == 0 {
		c.PollWait = DefaultPollWait
	}
	if c.OpenRetryFor == 0 {
		c.OpenRetryFor = DefaultOpenRetryFor
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = time.Second
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	if c.WarmFor == 0 {
		c.WarmFor = DefaultWarmFor
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Backend == nil:
		return errors.New("worker: no backend configured")
	case c.Processor == nil:
		return errors.New("worker: no processor configured (Config.Processor)")
	case c.Workers < 1:
		return fmt.Errorf("worker: Workers must be at least 1, got %d", c.Workers)
	case c.LeaseTTL < MinLeaseTTL:
		return fmt.Errorf("worker: LeaseTTL %s is below the %s minimum", c.LeaseTTL, MinLeaseTTL)
	case c.Heartbeat <= 0 || c.Heartbeat > c.LeaseTTL/2:
		return fmt.Errorf("worker: heartbeat %s must be positive and at most half the lease TTL %s", c.Heartbeat, c.LeaseTTL)
	case c.MaxAttempts < 1:
		return fmt.Errorf("worker: max attempts must be at least 1, got %d", c.MaxAttempts)
	case c.PollWait < time.Millisecond:
		return fmt.Errorf("worker: PollWait %s must be at least 1ms", c.PollWait)
	case c.IdleExit < 0:
		return fmt.Errorf("worker: IdleExit %s must not be negative (0: never exit)", c.IdleExit)
	}
	return nil
}
