package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
)

// component is one long-running part of the process: run blocks until its ctx ends (then
// returns nil once stopped) or it fails.
type component struct {
	name string
	run  func(context.Context) error
}

// errStuck: a component did not stop within Config.ShutdownTimeout.
var errStuck = errors.New("did not stop in time")

// running is a started component: how to stop it and when it has.
type running struct {
	name string
	stop context.CancelCauseFunc
	done chan struct{}
}

// supervise starts comps in order and waits until ctx ends or one of them fails (or returns
// on its own, which is a failure too). It then stops them in reverse order of start within
// Config.ShutdownTimeout. It returns the first failure, errStuck (wrapped) when some did not
// stop in time, or nil.
func (a *App) supervise(ctx context.Context, comps []component) error {
	g, gctx := errgroup.WithContext(ctx)
	started := make([]running, 0, len(comps))
	for _, c := range comps {
		cctx, stop := context.WithCancelCause(context.WithoutCancel(ctx))
		r := running{name: c.name, stop: stop, done: make(chan struct{})}
		started = append(started, r)
		g.Go(func() error {
			defer close(r.done)
			return a.runComponent(cctx, c)
		})
	}
	<-gctx.Done()
	cause := context.Cause(gctx)
	a.log.Info("shutting down", slog.String("why", cause.Error()))
	if err := a.stopAll(started, cause); err != nil {
		return err
	}
	return g.Wait()
}

// runComponent runs c; an error or a return before it was asked to stop is a failure.
func (a *App) runComponent(ctx context.Context, c component) error {
	err := c.run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	if err == nil {
		err = errors.New("stopped on its own")
	}
	a.log.Error("component failed; stopping everything", slog.String("component", c.name), slog.Any("err", err))
	return fmt.Errorf("%s: %w", c.name, err)
}

// stopAll stops the components last-started first, each after the previous one returned,
// all within Config.ShutdownTimeout.
func (a *App) stopAll(started []running, cause error) error {
	deadline := time.NewTimer(a.cfg.ShutdownTimeout)
	defer deadline.Stop()
	for i := len(started) - 1; i >= 0; i-- {
		started[i].stop(fmt.Errorf("shutting down: %w", cause))
		select {
		case <-started[i].done:
		case <-deadline.C:
			var stuck []string
			for _, r := range started[:i+1] {
				r.stop(cause)
				select {
				case <-r.done:
				default:
					stuck = append(stuck, r.name)
				}
			}
			a.log.Error("shutdown timed out", slog.String("still running", strings.Join(stuck, ", ")))
			return fmt.Errorf("%s %w (%s)", strings.Join(stuck, ", "), errStuck, a.cfg.ShutdownTimeout)
		}
	}
	return nil
}
