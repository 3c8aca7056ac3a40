// Package command is the command processor: it runs a configured shell command for each job
// in a per-tenant directory, with the instruction on stdin and the job in WO_* variables.
// Exit 0 means done. The command runs under a reaper supervisor, so on interrupt, lease loss
// or the death of the worker itself, every process it started is killed.
package command

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/reaper"
	"github.com/webordinary/webordinary/internal/worker"
)

// Config configures the processor.
type Config struct {
	// Command is run with `sh -c`. Required.
	Command string
	// Root holds one directory per tenant: Root/<project>/<user>. Required.
	Root string
	// Env is added to the command's environment (KEY=VALUE). The rest of the environment is
	// an allowlist (PATH, HOME, LANG, ...), never the worker's own secrets.
	Env []string
	// InterruptGrace is how long the command gets after SIGINT before everything is killed.
	// Default 5s.
	InterruptGrace time.Duration
	// TailBytes is how much of the end of the output a result keeps. Default 4 KiB.
	TailBytes int
}

// Processor implements worker.Processor.
type Processor struct{ cfg Config }

var _ worker.Processor = (*Processor)(nil)

// New validates cfg.
func New(cfg Config) (*Processor, error) {
	if strings.TrimSpace(cfg.Command) == "" {
		return nil, errors.New("command: no command configured (set --agent-command, e.g. --agent-command 'cat >> instructions.txt')")
	}
	if cfg.Root == "" {
		return nil, errors.New("command: no workspace root configured")
	}
	if cfg.InterruptGrace == 0 {
		cfg.InterruptGrace = 5 * time.Second
	}
	if cfg.TailBytes == 0 {
		cfg.TailBytes = 4 << 10
	}
	return &Processor{cfg: cfg}, nil
}

// allowedEnv are the worker's variables a command may see.
var allowedEnv = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR", "TERM"}

// Process runs the command for task.
func (p *Processor) Process(ctx context.Context, task worker.Task) (worker.Outcome, error) {
	dir := filepath.Join(p.cfg.Root, task.Job.Tenant.Project, task.Job.Tenant.User)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return worker.Outcome{}, fmt.Errorf("command: workspace %s: %w", dir, err)
	}
	tail := newTail(p.cfg.TailBytes)
	cmd := exec.Command("/bin/sh", "-c", p.cfg.Command)
	cmd.Dir, cmd.Env = dir, p.env(task)
	cmd.Stdin = strings.NewReader(task.Job.Instruction)
	cmd.Stdout, cmd.Stderr = tail, tail
	start := time.Now()
	proc, err := reaper.Start(cmd)
	if err != nil {
		return worker.Outcome{}, fmt.Errorf("command: start: %w", err)
	}
	code, err := p.wait(ctx, proc)
	out := worker.Outcome{ExitCode: code, OutputTail: tail.String(),
		Details: map[string]any{"durationMs": time.Since(start).Milliseconds()}}
	out.Summary = summary(out.OutputTail, code)
	switch {
	case err != nil:
		return out, fmt.Errorf("command: wait: %w", err)
	case ctx.Err() != nil:
		return out, context.Cause(ctx)
	case code != 0:
		return out, fmt.Errorf("command exited with status %d", code)
	}
	return out, nil
}

// wait waits for the command; when ctx ends it interrupts, then kills the whole tree after
// the grace period.
func (p *Processor) wait(ctx context.Context, proc *reaper.Process) (int, error) {
	type exit struct {
		code int
		err  error
	}
	done := make(chan exit, 1)
	go func() { c, err := proc.Wait(); done <- exit{c, err} }()
	select {
	case e := <-done:
		return e.code, e.err
	case <-ctx.Done():
	}
	_ = proc.Interrupt()
	t := time.NewTimer(p.cfg.InterruptGrace)
	defer t.Stop()
	select {
	case e := <-done:
		return e.code, e.err
	case <-t.C:
		_ = proc.Kill()
		e := <-done
		return e.code, e.err
	}
}

func (p *Processor) env(task worker.Task) []string {
	var env []string
	for _, k := range allowedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, p.cfg.Env...)
	return append(env,
		"WO_PROJECT="+task.Job.Tenant.Project,
		"WO_USER="+task.Job.Tenant.User,
		"WO_THREAD="+task.Job.Thread,
		"WO_JOB="+task.Job.ID,
		"WO_INSTRUCTION="+task.Job.Instruction,
		fmt.Sprintf("WO_ATTEMPT=%d", task.Attempt),
		fmt.Sprintf("WO_LEASE_TOKEN=%d", task.LeaseToken),
	)
}

// summary is the last non-empty output line, or a word on the exit status.
func summary(out string, code int) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
		return last
	}
	return fmt.Sprintf("command exited with status %d", code)
}
