package worker

import (
	"context"
	"errors"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/pipeline/report"
)

// Cancel causes seen by a Processor through context.Cause(ctx).
var (
	// ErrInterrupted: a newer instruction (or an operator) interrupted the job.
	ErrInterrupted = errors.New("interrupted by a newer instruction")
	// ErrShutdown: the worker is shutting down; the job will run again elsewhere.
	ErrShutdown = errors.New("worker shutting down")
	// broker.ErrLeaseLost: the tenant is no longer ours; do nothing irreversible.
)

// InterruptError is the cancel cause of an interrupted job; it matches ErrInterrupted.
type InterruptError struct {
	// By is the newer job that took over; empty when an operator stopped the job.
	By string
	// Reason is the interrupt's reason, for logs and the job page.
	Reason string
}

func (e *InterruptError) Error() string {
	if e.Reason == "" {
		return ErrInterrupted.Error()
	}
	return "interrupted: " + e.Reason
}

// Is makes errors.Is(err, ErrInterrupted) hold.
func (e *InterruptError) Is(target error) bool { return target == ErrInterrupted }

// InterruptedBy returns the newer job that took over from a job cancelled with cause, or "".
func InterruptedBy(cause error) string {
	var ie *InterruptError
	if errors.As(cause, &ie) {
		return ie.By
	}
	return ""
}

// Processor does the work of one job. Implementations must stop promptly when ctx is
// cancelled and must call Task.CheckLease before any irreversible step (push, deploy).
type Processor interface {
	// Process runs task. A nil error means done. An error means failed: it is retried up to
	// the worker's MaxAttempts unless it wraps ErrPermanent.
	Process(ctx context.Context, task Task) (Outcome, error)
}

// ProcessorFunc adapts a function to Processor.
type ProcessorFunc func(ctx context.Context, task Task) (Outcome, error)

// Process calls f.
func (f ProcessorFunc) Process(ctx context.Context, task Task) (Outcome, error) { return f(ctx, task) }

// ErrPermanent marks a failure that retrying cannot fix.
var ErrPermanent = errors.New("permanent failure")

// Task is one job as handed to a Processor.
type Task struct {
	Job        broker.Job
	Attempt    int
	Worker     string
	LeaseToken uint64
	// CheckLease returns nil while the lease is still ours, else broker.ErrLeaseLost.
	CheckLease func(ctx context.Context) error
}

// Outcome is what a Processor reports, done or not.
type Outcome struct {
	Summary    string
	ExitCode   int
	OutputTail string
	Report     report.Report
}
