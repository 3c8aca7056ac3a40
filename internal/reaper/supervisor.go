package reaper

import (
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/webordinary/webordinary/internal/rlimit"
)

const (
	// envMarker marks a process started by Start as a supervisor. It is never
	// passed on to the supervised command.
	envMarker = "WO_REAPER_SUPERVISE"

	// liveFD is the supervisor's end of the liveness pipe; the command spec
	// arrives on it first, then EOF means the caller is gone.
	liveFD = 3
	// statusFD is where the supervisor reports whether the command started.
	statusFD = 4

	// exitSetup is the supervisor's exit code when it could not start the
	// command; Start reports the actual error instead.
	exitSetup = 125

	// sweepTimeout bounds a sweep. Processes still present afterwards have a
	// SIGKILL pending (e.g. stuck in uninterruptible sleep).
	sweepTimeout = 5 * time.Second

	// processName is the supervisor's command name (comm) in ps and top.
	processName = "wo-reaper"

	prSetChildSubreaper = 36 // PR_SET_CHILD_SUBREAPER from <linux/prctl.h>
)

// spec is the command the caller wants supervised. It travels gob-encoded,
// which, unlike JSON, keeps strings that are not valid UTF-8 byte for byte.
type spec struct {
	Path       string
	Args       []string
	Env        []string
	Dir        string
	Credential *credential // nil: the supervisor's own user
	// Wrapper means the command only sets up the real one as its descendant (bubblewrap): an
	// interrupt goes to the rest of its process group, not to the wrapper, whose death would
	// tear the sandbox down before the real command could stop cleanly.
	Wrapper bool
}

// credential is the user the command starts as.
type credential struct {
	UID, GID uint32
	Groups   []uint32
}

// startReport tells the caller whether the command started.
type startReport struct {
	Pid int
	Err string
}

// Main must be called first thing in main() and in TestMain of any package that starts supervised
// processes. If this process was started as a supervisor it runs the supervisor and never returns;
// if it was started as the resource-limits shim (package rlimit, which the sandbox runs in a
// job's jail) it runs that and never returns; otherwise it returns immediately.
func Main() {
	rlimit.Main()
	if os.Getenv(envMarker) != "1" {
		return
	}
	os.Exit(supervise())
}

// signals are the channels the supervisor's loop listens on; one channel per
// meaning so that a burst of SIGCHLD cannot crowd out a SIGTERM.
type signals struct {
	chld, intr, term chan os.Signal
}

func notifySignals() signals {
	s := signals{
		chld: make(chan os.Signal, 1),
		intr: make(chan os.Signal, 1),
		term: make(chan os.Signal, 1),
	}
	signal.Notify(s.chld, syscall.SIGCHLD)
	signal.Notify(s.intr, syscall.SIGINT)
	signal.Notify(s.term, syscall.SIGTERM, syscall.SIGHUP)
	// Caught rather than ignored (an ignored SIGPIPE would be inherited by
	// the command): a write to a broken stderr then fails with EPIPE instead
	// of killing the supervisor before it has swept.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	return s
}

// supervise runs the supervisor and returns its exit code.
func supervise() int {
	sigs := notifySignals() // before anything else: no default-action deaths
	// Name the process in ps/top; exec'ing /proc/self/exe named it "exe".
	// Writing /proc/self/comm renames the thread group leader.
	_ = os.WriteFile("/proc/self/comm", []byte(processName), 0)
	live, status, err := inheritedPipes()
	if err != nil {
		fmt.Fprintf(os.Stderr, "reaper: %v\n", err)
		return exitSetup
	}
	pid, wrapper, err := setUp(live)
	report(status, pid, err)
	if err != nil {
		return exitSetup
	}
	gone := make(chan struct{})
	go watchParent(live, gone)
	s := &supervisor{cmdPid: pid, wrapper: wrapper}
	return s.run(sigs, gone)
}

// inheritedPipes wraps fds 3 and 4 and marks them close-on-exec so the
// command does not inherit them (a command holding the liveness pipe would
// keep it open after the caller died).
func inheritedPipes() (live, status *os.File, err error) {
	for _, fd := range []int{liveFD, statusFD} {
		if _, err := fcntl(fd, syscall.F_GETFD); err != nil {
			return nil, nil, fmt.Errorf("inherited fd %d: %w", fd, err)
		}
		syscall.CloseOnExec(fd)
	}
	return os.NewFile(liveFD, "reaper-liveness"), os.NewFile(statusFD, "reaper-status"), nil
}

func fcntl(fd, cmd int) (int, error) {
	r, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), uintptr(cmd), 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// setUp reads the command spec, becomes a subreaper and starts the command.
func setUp(live *os.File) (pid int, wrapper bool, err error) {
	var sp spec
	if err := gob.NewDecoder(live).Decode(&sp); err != nil {
		return 0, false, fmt.Errorf("read command spec: %w", err)
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		return 0, false, fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", errno)
	}
	// The command gets no capability the platform was given (see DropAmbientCaps): this
	// goroutine keeps its thread for the supervisor's life, and the command starts from it.
	runtime.LockOSThread()
	if err := DropAmbientCaps(); err != nil {
		return 0, false, err
	}
	pid, err = startCommand(sp)
	return pid, sp.Wrapper, err
}

// startCommand starts the command in its own session (so its own process group, and no
// controlling terminal a job could push input into) with the supervisor's standard streams.
// Pdeathsig kills the command if the supervisor dies without sweeping (its descendants are then
// out of reach).
func startCommand(sp spec) (int, error) {
	sys := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if c := sp.Credential; c != nil {
		sys.Credential = &syscall.Credential{Uid: c.UID, Gid: c.GID, Groups: c.Groups}
	}
	proc, err := os.StartProcess(sp.Path, sp.Args, &os.ProcAttr{
		Dir:   sp.Dir,
		Env:   sp.Env,
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   sys,
	})
	if err != nil {
		return 0, fmt.Errorf("start command: %w", err)
	}
	pid := proc.Pid
	// The supervisor reaps with wait4(-1); the os.Process handle is not used.
	_ = proc.Release()
	return pid, nil
}

// report sends the outcome of setUp to the caller and closes the pipe. A
// failure to write means the caller is gone, which watchParent handles.
func report(status *os.File, pid int, err error) {
	r := startReport{Pid: pid}
	if err != nil {
		r = startReport{Err: err.Error()}
	}
	_ = gob.NewEncoder(status).Encode(r)
	_ = status.Close()
}

// watchParent closes gone when the liveness pipe reaches EOF (or fails),
// which happens when the caller closed it or died.
func watchParent(live *os.File, gone chan<- struct{}) {
	_, _ = io.Copy(io.Discard, live)
	close(gone)
}

// supervisor tracks the command it started.
type supervisor struct {
	cmdPid  int
	wrapper bool
	status  *syscall.WaitStatus // set once the command has been reaped
}

// run is the supervisor's event loop; it returns the exit code.
func (s *supervisor) run(sigs signals, gone <-chan struct{}) int {
	for {
		select {
		case <-sigs.chld:
			s.reap()
			if s.status != nil {
				return s.finish() // command exited: sweep its leftovers
			}
		case <-sigs.intr:
			s.interrupt()
		case <-sigs.term:
			return s.finish()
		case <-gone:
			return s.finish()
		}
	}
}

// interrupt sends SIGINT to the command's process group: all of it, or, for a wrapper,
// every member but the wrapper itself.
func (s *supervisor) interrupt() {
	if !s.wrapper {
		_ = syscall.Kill(-s.cmdPid, syscall.SIGINT) // ESRCH: group is empty
		return
	}
	pids, err := descendants(os.Getpid())
	if err != nil {
		return
	}
	for _, pid := range pids {
		if st, err := readStat(pid); err == nil && pid != s.cmdPid && st.PGrp == s.cmdPid {
			_ = syscall.Kill(pid, syscall.SIGINT)
		}
	}
}

// finish sweeps all descendants and returns the exit code to exit with.
func (s *supervisor) finish() int {
	if err := s.sweep(); err != nil {
		fmt.Fprintf(os.Stderr, "reaper: %v\n", err)
	}
	return s.exitCode()
}

// sweep kills and reaps every descendant until none is left or sweepTimeout
// passes.
func (s *supervisor) sweep() error {
	deadline := time.Now().Add(sweepTimeout)
	self := os.Getpid()
	for {
		killErr := killTree(self)
		if s.reap() {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("sweep: descendants still present after %v", sweepTimeout), killErr)
		}
		time.Sleep(pollInterval)
	}
}

// reap reaps every child that has exited, recording the command's status,
// and reports whether the supervisor has no children left.
func (s *supervisor) reap() (none bool) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG|syscall.WALL, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.ECHILD):
			return true
		case err != nil || pid <= 0:
			return false
		}
		if pid == s.cmdPid {
			s.status = &ws
		}
	}
}

// exitCode is the command's exit code, 128+signal if it was signalled.
func (s *supervisor) exitCode() int {
	if s.status == nil {
		return 128 + int(syscall.SIGKILL) // not reaped: the sweep timed out
	}
	return statusCode(*s.status)
}

func statusCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
