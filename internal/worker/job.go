package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/failure"
	"github.com/webordinary/webordinary/internal/metrics"
)

// runJob runs one delivery to its end. It reports false when the tenant must be left at once
// (lease lost, or shutdown handed the job back).
func (o *ownership) runJob(shutdown context.Context, d broker.Delivery) bool {
	log := o.log.With(slog.String("job", d.Job().ID))
	d = o.fence.Delivery(d) // every settle is refused once the lease is not ours
	if o.lost() {
		return false
	}
	// The job is current before its record says running: an interrupt sent as soon as
	// anyone can see it running finds it here and cancels jctx, even before Process starts.
	jctx, cancel := context.WithCancelCause(o.ctx)
	defer cancel(nil)
	o.setCurrent(&current{id: d.Job().ID, thread: d.Job().Thread, d: d, cancel: cancel})
	rec, err := o.start(d)
	if err != nil {
		o.setCurrent(nil)
	}
	switch {
	case errors.Is(err, errSettled):
		o.resettle(d, rec, log)
		return true
	case errors.Is(err, errExhausted):
		o.finish(d, rec, broker.StateDead, Outcome{}, fmt.Errorf("gave up: started %d times without finishing "+
			"(each time its worker crashed or lost the tenant's lease); last error: %q", rec.Attempts, rec.LastError), log)
		return true
	case err != nil:
		if o.lost() || o.refused(err) {
			return false
		}
		log.ErrorContext(o.ctx, "mark job running; retrying", slog.Any("err", err))
		_ = o.holdBack(d, time.Second)
		return true
	}
	o.jobs++
	out, perr, cause := o.process(shutdown, jctx, cancel, d, rec)
	return o.settle(d, rec, out, perr, cause, log)
}

// crashStarts is how many starts per allowed attempt a job may use up without finishing.
const crashStarts = 2

var (
	errSettled   = errors.New("job already has its final state")
	errExhausted = errors.New("job has used all its attempts")
)

// start marks the job running and counts the attempt, in one compare-and-set write. A job
// already final (redelivered after a crash) returns errSettled. A job started crashStarts
// times per allowed attempt without ever finishing returns errExhausted: it is taking its
// workers down with it (a crash is not told apart from bad luck, hence the allowance). A
// missing record is made from the message: records expire and messages don't, and a job
// submitted under a new id is recorded while it is published, so its record may not be
// written yet, or not at all (router.Submit).
func (o *ownership) start(d broker.Delivery) (broker.JobRecord, error) {
	job := d.Job()
	o.w.set("running", o.leaseNow(), job.ID)
	mark := func(r *broker.JobRecord) error {
		if r.Attempts >= crashStarts*o.w.cfg.MaxAttempts {
			return errExhausted
		}
		r.State, r.Attempts, r.Worker, r.LeaseToken = broker.StateRunning, r.Attempts+1, o.w.id, o.token
		r.StartedAt = time.Now()
		return nil
	}
	rec, err := o.updateUnlessFinal(job.ID, mark)
	if errors.Is(err, broker.ErrNotFound) {
		err = o.b.Jobs.Create(o.ctx, broker.QueuedRecord(job))
		if err == nil || errors.Is(err, broker.ErrExists) {
			rec, err = o.updateUnlessFinal(job.ID, mark)
		}
	}
	return rec, err
}

// updateUnlessFinal applies fn to the job's record unless the record is final, when it
// returns errSettled and the record as it is: a final record (this job's earlier run, or
// another owner's, one that lost the lease without knowing it) is only re-settled, never
// made running or queued again. The write is fenced (broker.Fence): ErrLeaseLost once the
// lease is not ours.
func (o *ownership) updateUnlessFinal(id string, fn func(*broker.JobRecord) error) (broker.JobRecord, error) {
	return o.fence.UpdateJob(o.ctx, id, func(r *broker.JobRecord) error {
		if r.State.Final() {
			return errSettled
		}
		return fn(r)
	})
}

// process runs the processor with a context cancelled by lease loss (cause ErrLeaseLost),
// an interrupt (ErrInterrupted) or shutdown after the grace period (ErrShutdown).
// jctx is the job's context, made current by runJob.
func (o *ownership) process(shutdown, jctx context.Context, cancel context.CancelCauseFunc, d broker.Delivery, rec broker.JobRecord) (Outcome, error, error) {
	defer o.w.set("owning", o.leaseNow(), "")
	stopGrace := context.AfterFunc(shutdown, func() {
		t := time.AfterFunc(o.w.cfg.ShutdownGrace, func() { cancel(ErrShutdown) })
		context.AfterFunc(jctx, func() { t.Stop() })
	})
	task := Task{Job: d.Job(), Attempt: rec.Attempts, Worker: o.w.id, LeaseToken: o.token, CheckLease: o.checkLease}
	out, err := o.w.cfg.Processor.Process(jctx, task)
	o.setCurrent(nil) // no interrupt can land between the processor's return and reading its cause
	stopGrace()
	return out, err, context.Cause(jctx)
}

func (o *ownership) setCurrent(c *current) {
	o.mu.Lock()
	o.cur = c
	o.mu.Unlock()
}

// settle turns the processor's return into the job's next state.
func (o *ownership) settle(d broker.Delivery, rec broker.JobRecord, out Outcome, perr, cause error, log *slog.Logger) bool {
	switch {
	case o.lost() || errors.Is(perr, broker.ErrLeaseLost):
		log.WarnContext(o.ctx, "lease lost during job; leaving it to the next owner")
		return false
	case perr == nil: // finished: a late interrupt or shutdown changes nothing
		o.finish(d, rec, broker.StateDone, out, nil, log)
	case errors.Is(cause, ErrShutdown):
		o.handBack(d, rec, log)
		return false
	case errors.Is(cause, ErrInterrupted):
		o.finish(d, rec, broker.StateInterrupted, out, cause, log)
	case errors.Is(perr, ErrPermanent):
		o.finish(d, rec, broker.StateFailed, out, perr, log)
	case rec.Failures+1 < o.w.cfg.MaxAttempts:
		o.retry(d, rec, perr, log)
	default:
		rec.Failures++
		o.finish(d, rec, broker.StateDead, out, fmt.Errorf("gave up after %d failed attempts: %w", rec.Failures, perr), log)
	}
	return true
}

func (o *ownership) retry(d broker.Delivery, rec broker.JobRecord, perr error, log *slog.Logger) {
	delay := o.w.cfg.RetryBackoff << rec.Failures
	log.WarnContext(o.ctx, "job failed; will retry", slog.Int("failures", rec.Failures+1), slog.Duration("delay", delay), slog.Any("err", perr))
	cur, err := o.updateUnlessFinal(rec.Job.ID, func(r *broker.JobRecord) error {
		r.State, r.LastError, r.Failures = broker.StateQueued, perr.Error(), r.Failures+1
		return nil
	})
	switch {
	case errors.Is(err, errSettled):
		o.settledElsewhere(d, cur, log)
		return
	case o.refused(err):
		return
	case err != nil:
		log.ErrorContext(o.ctx, "record failed attempt", slog.Any("err", err))
	}
	o.refused(o.holdBack(d, delay))
}

// settledElsewhere: the job's record became final while this owner ran it (another owner, one
// that lost the lease without knowing it, finished it). Its record is kept, not made queued
// again: the other may have removed the job's message, and nothing would make it final again.
func (o *ownership) settledElsewhere(d broker.Delivery, rec broker.JobRecord, log *slog.Logger) {
	log.WarnContext(o.ctx, "job finished by another owner meanwhile; keeping its final record", slog.String("state", string(rec.State)))
	o.resettle(d, rec, log)
}

// handBack returns a job interrupted by shutdown to the queue without counting the attempt.
func (o *ownership) handBack(d broker.Delivery, rec broker.JobRecord, log *slog.Logger) {
	log.InfoContext(o.ctx, "shutdown: handing job back")
	cur, err := o.updateUnlessFinal(rec.Job.ID, func(r *broker.JobRecord) error {
		r.State, r.Attempts, r.LastError = broker.StateQueued, max(r.Attempts-1, 0), ErrShutdown.Error()
		return nil
	})
	if errors.Is(err, errSettled) {
		o.settledElsewhere(d, cur, log)
		return
	}
	if !o.refused(err) {
		o.refused(o.holdBack(d, 0))
	}
}

// finish records a final state, publishes the result, then settles the message. A crash
// between steps is repaired on redelivery by resettle (the record is already final).
func (o *ownership) finish(d broker.Delivery, rec broker.JobRecord, state broker.State, out Outcome, cause error, log *slog.Logger) {
	res := o.result(rec, state, out, cause)
	rec, err := o.fence.UpdateJob(o.ctx, rec.Job.ID, func(r *broker.JobRecord) error {
		r.State, r.FinishedAt, r.Result, r.Failures = state, res.FinishedAt, &res, rec.Failures
		if cause != nil {
			r.LastError = cause.Error()
		}
		return nil
	})
	if o.refused(err) {
		return
	}
	if err != nil {
		log.ErrorContext(o.ctx, "record job result; will retry", slog.Any("err", err))
		o.refused(o.holdBack(d, time.Second))
		return
	}
	log.InfoContext(o.ctx, "job finished", slog.String("state", string(state)), slog.Duration("duration", res.Duration))
	metrics.Jobs.WithLabelValues(string(state)).Inc()
	metrics.JobDuration.WithLabelValues(string(state)).Observe(res.Duration.Seconds())
	if state == broker.StateDead {
		metrics.DeadLetters.Inc()
	}
	o.resettle(d, rec, log)
}

// resettle publishes a final record's result (de-duplicated by job id) and settles the message.
func (o *ownership) resettle(d broker.Delivery, rec broker.JobRecord, log *slog.Logger) {
	if rec.Result == nil { // a final record without a result (older data): still tell the sender
		res := o.result(rec, rec.State, Outcome{}, errors.New(rec.LastError))
		rec.Result = &res
	}
	if rec.Result != nil {
		if err := o.fence.PublishResult(o.ctx, *rec.Result); err != nil {
			if !o.refused(err) {
				log.ErrorContext(o.ctx, "publish result; will retry", slog.Any("err", err))
				o.refused(o.holdBack(d, time.Second))
			}
			return
		}
	}
	var err error
	if rec.State == broker.StateDead {
		err = d.DeadLetter(o.ctx, rec.LastError)
	} else {
		err = d.Ack(o.ctx)
	}
	if err != nil && !o.refused(err) {
		log.ErrorContext(o.ctx, "settle job message", slog.Any("err", err))
	}
}

// holdBack returns d to the queue to come again after delay (Retry), and notes that the
// tenant has it still to do.
func (o *ownership) holdBack(d broker.Delivery, delay time.Duration) error {
	err := d.Retry(o.ctx, delay)
	if err == nil {
		o.heldBack = true
	}
	return err
}

// refused reports whether err is the store refusing this owner's write because the lease is
// no longer ours (broker.Fence); the tenure then ends at once, as on a lost renewal.
func (o *ownership) refused(err error) bool {
	if !errors.Is(err, broker.ErrLeaseLost) {
		return false
	}
	if !o.lost() {
		o.lose(err)
	}
	return true
}

func (o *ownership) result(rec broker.JobRecord, state broker.State, out Outcome, cause error) broker.Result {
	now := time.Now()
	res := broker.Result{JobID: rec.Job.ID, Tenant: rec.Job.Tenant, Thread: rec.Job.Thread, State: state,
		Summary: out.Summary, ExitCode: out.ExitCode, OutputTail: out.OutputTail, Attempt: rec.Attempts,
		Worker: o.w.id, LeaseToken: o.token, FinishedAt: now}
	job := rec.Job.WithoutBulk()
	res.Job = &job
	if !rec.StartedAt.IsZero() {
		res.Duration = now.Sub(rec.StartedAt)
	}
	if cause != nil {
		res.Error = cause.Error()
		out.Report.Failure = cmp.Or(out.Report.Failure, failure.Of(cause))
	}
	res.Details = out.Report.Encode()
	return res
}
