package reaper

import (
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// selfExe re-executes the running binary even if its file was replaced
	// or removed on disk since it started (e.g. during a deploy).
	selfExe = "/proc/self/exe"

	// handshakeTimeout bounds sending the spec and receiving the start report.
	handshakeTimeout = 15 * time.Second
	// ioWaitDelay bounds how long Wait waits for the caller's non-file
	// Stdin/Stdout/Stderr to be drained once the supervisor has exited.
	ioWaitDelay = 2 * time.Second
	// killTimeout bounds how long Kill waits for the supervisor's own sweep
	// before sweeping from the caller's side.
	killTimeout = sweepTimeout + ioWaitDelay + 3*time.Second
	// forceTimeout bounds how long Kill waits after the forced sweep.
	forceTimeout = 5 * time.Second
)

// supervisorPdeathsig is the supervisor's parent-death signal, the second
// trigger besides the liveness pipe. Tests turn it off to check the pipe alone.
var supervisorPdeathsig = syscall.SIGTERM

// Process is a command running under a supervisor.
type Process struct {
	sup      *exec.Cmd
	live     *os.File // write end of the liveness pipe; closing it = "caller gone"
	liveOnce sync.Once

	done     chan struct{} // closed once the supervisor has been waited for
	exitCode int
	waitErr  error
}

// Start starts cmd under a supervisor. cmd.Path, cmd.Args, cmd.Env (nil = os.Environ()), cmd.Dir,
// cmd.Stdin, cmd.Stdout, cmd.Stderr are honored. cmd must not have been started. cmd.ExtraFiles
// must be nil; cmd.SysProcAttr may only set Credential (the supervisor starts the command as that
// user, e.g. a sandboxed job's unprivileged uid).
//
// cmd itself is only a description and is never started: its Process and
// ProcessState stay nil, and its context, Cancel and WaitDelay are ignored
// (use Kill). The environment variable marking supervisors is removed from
// the command's environment. Start returns once the command is running, or
// with the error that prevented it from starting (e.g. a missing Dir or a
// non-executable Path). The calling binary must call Main first thing in
// main, because the supervisor is that same binary re-executed.
func Start(cmd *exec.Cmd) (*Process, error) {
	return start(cmd, false)
}

// StartWrapper is Start for a command that runs the real one as its descendant, such as
// bubblewrap: Interrupt signals the wrapper's process group except the wrapper, which stays to
// report the real command's exit status.
func StartWrapper(cmd *exec.Cmd) (*Process, error) {
	return start(cmd, true)
}

// Placement puts a supervisor, and so its command and every process that starts, in a control
// group before the command can start.
type Placement struct {
	// UseCgroupFD starts the supervisor in the cgroup v2 directory open as CgroupFD (clone3
	// with CLONE_INTO_CGROUP: in it from its first instruction).
	UseCgroupFD bool
	CgroupFD    int
	// Place, when set, is called with the supervisor's pid once it runs and before it is sent
	// its command, which it waits for: whatever Place does (write the pid to a cgroup v1
	// group) is done before the command starts. An error stops the supervisor.
	Place func(pid int) error
}

// StartWrapperIn is StartWrapper with the supervisor placed by pl.
func StartWrapperIn(cmd *exec.Cmd, pl Placement) (*Process, error) {
	return startIn(cmd, true, pl)
}

func start(cmd *exec.Cmd, wrapper bool) (*Process, error) {
	return startIn(cmd, wrapper, Placement{})
}

func startIn(cmd *exec.Cmd, wrapper bool, pl Placement) (*Process, error) {
	if err := checkCmd(cmd); err != nil {
		return nil, err
	}
	sp := commandSpec(cmd)
	sp.Wrapper = wrapper
	var body bytes.Buffer
	if err := gob.NewEncoder(&body).Encode(sp); err != nil {
		return nil, fmt.Errorf("reaper: encode command spec: %w", err)
	}
	p, status, err := startSupervisor(cmd, pl)
	if err != nil {
		return nil, err
	}
	if err := p.place(pl.Place); err != nil {
		_ = status.Close()
		return nil, err
	}
	if err := p.handshake(body.Bytes(), status); err != nil {
		return nil, err
	}
	return p, nil
}

func checkCmd(cmd *exec.Cmd) error {
	switch {
	case cmd == nil:
		return errors.New("reaper: nil command")
	case cmd.Err != nil:
		return fmt.Errorf("reaper: command %q: %w", cmd.Path, cmd.Err)
	case cmd.Path == "":
		return errors.New("reaper: command has no path")
	case cmd.Process != nil:
		return fmt.Errorf("reaper: command %q already started", cmd.Path)
	case cmd.SysProcAttr != nil && !onlyCredential(cmd.SysProcAttr):
		return fmt.Errorf("reaper: command %q: SysProcAttr may only set Credential", cmd.Path)
	case cmd.ExtraFiles != nil:
		return fmt.Errorf("reaper: command %q: ExtraFiles must be nil", cmd.Path)
	}
	return nil
}

// commandSpec resolves cmd the way exec.Cmd would run it.
func commandSpec(cmd *exec.Cmd) spec {
	args := cmd.Args
	if len(args) == 0 {
		args = []string{cmd.Path}
	}
	sp := spec{Path: cmd.Path, Args: args, Env: withoutMarker(cmd.Environ()), Dir: cmd.Dir}
	if a := cmd.SysProcAttr; a != nil && a.Credential != nil {
		sp.Credential = &credential{UID: a.Credential.Uid, GID: a.Credential.Gid, Groups: a.Credential.Groups}
	}
	return sp
}

func onlyCredential(a *syscall.SysProcAttr) bool {
	c := *a
	c.Credential = nil
	return reflect.ValueOf(c).IsZero()
}

func withoutMarker(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, envMarker+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// startSupervisor starts the supervisor process (in pl's cgroup v2 directory, if any) and the
// goroutine waiting for it. It returns the read end of the status pipe.
func startSupervisor(cmd *exec.Cmd, pl Placement) (*Process, *os.File, error) {
	liveR, liveW, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("reaper: liveness pipe: %w", err)
	}
	statR, statW, err := os.Pipe()
	if err != nil {
		closeAll(liveR, liveW)
		return nil, nil, fmt.Errorf("reaper: status pipe: %w", err)
	}
	sup := &exec.Cmd{
		Path:       selfExe,
		Args:       []string{selfExe, "reaper-supervisor", cmd.Path},
		Env:        []string{envMarker + "=1"}, // the supervisor needs nothing of the platform's environment (secrets)
		Stdin:      cmd.Stdin,
		Stdout:     cmd.Stdout,
		Stderr:     cmd.Stderr,
		ExtraFiles: []*os.File{liveR, statW}, // fds 3 and 4
		WaitDelay:  ioWaitDelay,
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true, // a kill(-pgid) aimed at the caller must not skip the sweep
			Pdeathsig: supervisorPdeathsig,
		},
	}
	sup.SysProcAttr.UseCgroupFD, sup.SysProcAttr.CgroupFD = pl.UseCgroupFD, pl.CgroupFD
	err = startOnFreshThread(sup)
	closeAll(liveR, statW) // the supervisor has its own copies now
	if err != nil {
		closeAll(liveW, statR)
		return nil, nil, fmt.Errorf("reaper: start supervisor for %q: %w", cmd.Path, err)
	}
	p := &Process{sup: sup, live: liveW, done: make(chan struct{})}
	go p.wait()
	return p, statR, nil
}

// startOnFreshThread starts cmd from a new goroutine. Pdeathsig fires when
// the forking OS thread exits; a new goroutine is never locked to a thread
// (LockOSThread is not inherited), and Go only ends threads whose goroutine
// exits while locked, so the signal fires only when the process dies.
func startOnFreshThread(cmd *exec.Cmd) error {
	errc := make(chan error, 1)
	go func() { errc <- cmd.Start() }()
	return <-errc
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// place runs a Placement's Place on the supervisor, which is waiting for its command; on
// failure the supervisor is torn down.
func (p *Process) place(place func(pid int) error) error {
	if place == nil {
		return nil
	}
	if err := place(p.Pid()); err != nil {
		p.forceKill()
		p.awaitDone(forceTimeout)
		return fmt.Errorf("reaper: place supervisor %d: %w", p.Pid(), err)
	}
	return nil
}

// handshake sends the command spec and waits for the start report. On
// failure the supervisor is torn down before returning.
func (p *Process) handshake(body []byte, status *os.File) error {
	defer status.Close()
	report, err := p.exchange(body, status)
	if err != nil {
		p.forceKill()
		p.awaitDone(forceTimeout)
		return fmt.Errorf("reaper: supervisor %d handshake (is reaper.Main called first in main?): %w", p.Pid(), err)
	}
	if report.Err != "" {
		p.awaitDone(forceTimeout) // the supervisor exits by itself
		return fmt.Errorf("reaper: %s", report.Err)
	}
	return nil
}

func (p *Process) exchange(body []byte, status *os.File) (startReport, error) {
	var r startReport
	deadline := time.Now().Add(handshakeTimeout)
	if err := p.live.SetWriteDeadline(deadline); err != nil {
		return r, fmt.Errorf("set write deadline: %w", err)
	}
	if _, err := p.live.Write(body); err != nil {
		return r, fmt.Errorf("send command spec: %w", err)
	}
	if err := p.live.SetWriteDeadline(time.Time{}); err != nil {
		return r, fmt.Errorf("clear write deadline: %w", err)
	}
	if err := status.SetReadDeadline(deadline); err != nil {
		return r, fmt.Errorf("set read deadline: %w", err)
	}
	if err := gob.NewDecoder(status).Decode(&r); err != nil {
		return r, fmt.Errorf("read start report: %w", err)
	}
	return r, nil
}

// wait waits for the supervisor and records the outcome.
func (p *Process) wait() {
	err := p.sup.Wait()
	p.exitCode, p.waitErr = exitResult(p.sup.ProcessState, err)
	p.closeLive()
	close(p.done)
}

// exitResult turns the supervisor's wait result into (exit code, error). A
// non-zero exit is not an error; a failure to wait or to copy I/O is.
func exitResult(state *os.ProcessState, err error) (int, error) {
	if state == nil {
		return -1, fmt.Errorf("reaper: wait for supervisor: %w", err)
	}
	code := state.ExitCode()
	if ws, ok := state.Sys().(syscall.WaitStatus); ok {
		code = statusCode(ws)
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return code, fmt.Errorf("reaper: wait for supervisor %d: %w", state.Pid(), err)
	}
	return code, nil
}

func (p *Process) closeLive() {
	p.liveOnce.Do(func() { _ = p.live.Close() })
}

// Interrupt asks the command to stop (SIGINT to its process group). Safe to call more than once and after exit.
func (p *Process) Interrupt() error {
	return p.signal(syscall.SIGINT)
}

// Kill kills the command and every process it started, then returns once the supervisor is gone
// (bounded; after that Wait returns promptly). Safe after exit.
//
// Kill asks the supervisor to sweep (SIGTERM, and EOF on the liveness pipe).
// If the supervisor is not gone within killTimeout, Kill sweeps the
// supervisor's descendants itself and SIGKILLs the supervisor. An error means
// the supervisor could not be signalled or was still present at the end.
func (p *Process) Kill() error {
	if p.exited() {
		return nil
	}
	err := p.signal(syscall.SIGTERM)
	p.closeLive()
	if p.awaitDone(killTimeout) {
		return nil
	}
	p.forceKill()
	if p.awaitDone(forceTimeout) {
		return nil
	}
	return errors.Join(err, fmt.Errorf("reaper: supervisor %d still present after kill", p.Pid()))
}

// forceKill sweeps the supervisor's descendants from the caller's side and
// then SIGKILLs the supervisor. Descendants are killed first so that they
// are not orphaned to init while still alive.
func (p *Process) forceKill() {
	_ = killTree(p.Pid())
	_ = p.signal(syscall.SIGKILL)
}

// Wait waits for the command (and the sweep of its leftovers) and returns its exit code
// (128+signal when signalled). err is non-nil only when waiting itself failed.
//
// Wait may be called any number of times, concurrently with Kill and
// Interrupt; every call returns the same result. When cmd.Stdin, Stdout or
// Stderr is not an *os.File and copying it has not finished 2 s after the
// supervisor exited, Wait gives up on it and err wraps exec.ErrWaitDelay
// (exitCode is still valid).
func (p *Process) Wait() (exitCode int, err error) {
	<-p.done
	return p.exitCode, p.waitErr
}

// Pid is the supervisor's pid.
func (p *Process) Pid() int {
	return p.sup.Process.Pid
}

func (p *Process) signal(sig syscall.Signal) error {
	err := p.sup.Process.Signal(sig)
	if err == nil || errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return fmt.Errorf("reaper: send %v to supervisor %d: %w", sig, p.Pid(), err)
}

func (p *Process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// awaitDone reports whether the supervisor was waited for within d.
func (p *Process) awaitDone(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}
