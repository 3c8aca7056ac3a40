package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/jobenv"
	"github.com/webordinary/webordinary/internal/reaper"
)

// runAgent runs one agent process under a supervisor and judges its output.
func runAgent(ctx context.Context, spec Spec, req Request, ad adapter, path string) (Result, error) {
	if err := prepareDirs(req); err != nil {
		return Result{}, err
	}
	inv, p := ad.invoke(spec, req)
	out := newSink(p, req.Output)
	cmd := &exec.Cmd{
		Path:   path,
		Args:   append([]string{path}, inv.args...),
		Dir:    req.Dir,
		Env:    environ(osLookup, ad, spec, req, inv),
		Stdin:  strings.NewReader(inv.stdin),
		Stdout: out.writer(true),
		Stderr: out.writer(false),
	}
	start := time.Now()
	if req.Home != "" {
		cmd.Env = jobenv.Dedup(append(cmd.Env, "HOME="+req.Home))
	}
	if req.Jail.Active() {
		cmd.Env = jobenv.Dedup(append(cmd.Env, "TMPDIR=/tmp"))
	}
	proc, err := req.Jail.Start(cmd)
	if err != nil {
		return Result{}, fmt.Errorf("agent: start %s: %w", spec.Kind, err)
	}
	ex := supervise(ctx, spec, proc, out)
	return judge(ctx, spec, out, ex, time.Since(start)), nil
}

// prepareDirs checks the working tree and creates the config dir.
func prepareDirs(req Request) error {
	fi, err := os.Stat(req.Dir)
	switch {
	case err != nil:
		return fmt.Errorf("agent: working directory: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("agent: working directory %s is not a directory", req.Dir)
	}
	for _, d := range []string{req.ConfigDir, req.Home} {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("agent: state dir: %w", err)
		}
	}
	return nil
}

// judge builds the Result once the process and everything it started are gone.
func judge(ctx context.Context, spec Spec, out *sink, ex exit, d time.Duration) Result {
	out.finish()
	res := Result{ExitCode: ex.code, Duration: d, OutputTail: out.tailString()}
	out.mu.Lock()
	out.parser.judge(&res)
	out.mu.Unlock()
	// ErrWaitDelay: output still open 2s after the exit; what was read is judged as is.
	if ex.err != nil && !errors.Is(ex.err, exec.ErrWaitDelay) {
		res.OK, res.Error = false, "waiting for the agent failed: "+ex.err.Error()
	}
	ex.reason.apply(ctx, spec, &res)
	out.mu.Lock()
	own := spec.Kind == KindCommand || out.events == 0 // no event: the output is the launcher's
	out.mu.Unlock()
	res.Setup = setupFailure(res, own)
	return res
}

// exit is how a run ended.
type exit struct {
	reason stopReason
	code   int   // exit code, 128+signal when killed
	err    error // waiting failed
}

// stopReason is why the runner stopped the agent; the zero value means it ended by itself.
type stopReason struct {
	interrupted bool
	watchdog    string // WatchdogWallClock or WatchdogNoOutput
}

func (r stopReason) apply(ctx context.Context, spec Spec, res *Result) {
	switch {
	case r.interrupted:
		res.Interrupted = true
		res.Error = "interrupted: " + context.Cause(ctx).Error()
	case r.watchdog == WatchdogWallClock:
		res.TimedOut = r.watchdog
		res.Error = fmt.Sprintf("stopped by the wall-clock watchdog: still running after %s", spec.WallClock)
	case r.watchdog == WatchdogNoOutput:
		res.TimedOut = r.watchdog
		res.Error = fmt.Sprintf("stopped by the no-output watchdog: no output for %s", spec.NoOutput)
	default:
		return
	}
	res.OK = false
}

// supervise waits for proc, stopping it when ctx ends or a watchdog fires.
func supervise(ctx context.Context, spec Spec, proc *reaper.Process, out *sink) exit {
	done := make(chan struct{})
	var ex exit
	go func() {
		ex.code, ex.err = proc.Wait()
		close(done)
	}()
	reason := watch(ctx, spec, out, done)
	if reason != (stopReason{}) {
		stop(proc, spec.InterruptGrace, done)
	}
	<-done
	ex.reason = reason
	return ex
}

// watch blocks until the process is done (zero stopReason) or must be stopped.
func watch(ctx context.Context, spec Spec, out *sink, done <-chan struct{}) stopReason {
	wall := time.NewTimer(spec.WallClock)
	defer wall.Stop()
	quiet := time.NewTimer(spec.NoOutput)
	defer quiet.Stop()
	for {
		var r stopReason
		select {
		case <-done:
			return stopReason{}
		case <-ctx.Done():
			r.interrupted = true
		case <-wall.C:
			r.watchdog = WatchdogWallClock
		case <-quiet.C:
			if left := spec.NoOutput - out.idle(); left > 0 {
				quiet.Reset(left)
				continue
			}
			r.watchdog = WatchdogNoOutput
		}
		if closed(done) { // it ended by itself at the same moment
			return stopReason{}
		}
		return r
	}
}

// stop interrupts proc softly, then kills every process it started after grace.
func stop(proc *reaper.Process, grace time.Duration, done <-chan struct{}) {
	_ = proc.Interrupt()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = proc.Kill()
	}
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// lastLine is the last non-empty line of s, trimmed.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return ""
}
