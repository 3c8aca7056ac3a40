package reaper_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/reaper"
)

const (
	// fakeWorkerEnv makes the test binary act as a worker that starts a
	// supervised command and blocks (see runFakeWorker).
	fakeWorkerEnv    = "REAPER_TEST_FAKE_WORKER"
	fakeWorkerDirEnv = "REAPER_TEST_FAKE_WORKER_DIR"
	// tokenEnv tags every process a test starts, so leftovers can be found
	// by scanning /proc/*/environ whatever their parentage.
	tokenEnv = "REAPER_TEST_TOKEN"

	deadline = 10 * time.Second
)

func TestMain(m *testing.M) {
	reaper.Main()
	if mode := os.Getenv(fakeWorkerEnv); mode != "" {
		os.Exit(runFakeWorker(mode, os.Getenv(fakeWorkerDirEnv)))
	}
	// Under -race a binary exiting with code 0 sleeps 1 s (atexit_sleep_ms)
	// by default; supervisors inherit this environment.
	if _, ok := os.LookupEnv("GORACE"); !ok {
		_ = os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	// Supervisors orphaned by TestWorkerKilledWithSIGKILL are reparented to
	// this process (rather than to init, which in some containers never reaps
	// zombies), so the test can reap them.
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, 36 /* PR_SET_CHILD_SUBREAPER */, 1, 0); errno != 0 {
		fmt.Fprintf(os.Stderr, "prctl(PR_SET_CHILD_SUBREAPER): %v\n", errno)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// Fake worker modes: which of the supervisor's two "caller died" triggers
// can fire when the fake worker is killed.
const (
	bothTriggers  = "both"
	pipeOnly      = "pipe-only"      // no parent-death signal
	pdeathsigOnly = "pdeathsig-only" // liveness pipe leaked to a holder process
)

// runFakeWorker is a worker that starts a supervised command recording its
// pids in dir and waits for it. The test kills it with SIGKILL.
func runFakeWorker(mode, dir string) int {
	if err := fakeWorker(mode, dir); err != nil {
		fmt.Fprintf(os.Stderr, "fake worker: %v\n", err)
		return 1
	}
	return 0
}

func fakeWorker(mode, dir string) error {
	if mode == pipeOnly {
		reaper.SetSupervisorPdeathsig(0)
	}
	cmd := exec.Command("sh", "-c", `setsid sleep 300 & echo $! >> pids; sleep 300 & echo $! >> pids; echo $$ >> pids; wait`)
	cmd.Dir = dir
	p, err := reaper.Start(cmd)
	if err != nil {
		return err
	}
	if mode == pdeathsigOnly {
		// The holder keeps the liveness pipe open after the worker dies.
		holder := exec.Command("sleep", "300")
		holder.Env = []string{} // untagged: it is not the supervisor's
		holder.ExtraFiles = []*os.File{reaper.LivenessPipe(p)}
		if err := holder.Start(); err != nil {
			return err
		}
		if err := writeFileAtomic(filepath.Join(dir, "holder"), holder.Process.Pid); err != nil {
			return err
		}
	}
	if err := writeFileAtomic(filepath.Join(dir, "supervisor"), p.Pid()); err != nil {
		return err
	}
	_, err = p.Wait()
	return err
}

func writeFileAtomic(path string, pid int) error {
	if err := os.WriteFile(path+".tmp", []byte(strconv.Itoa(pid)+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

func TestExitCodeAndOutput(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	cmd := exec.Command("sh", "-c", "echo hi; echo oops >&2; exit 3")
	cmd.Stdout = &out
	var errOut syncBuffer
	cmd.Stderr = &errOut
	p := start(t, cmd)
	code, err := wait(t, p)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if code != 3 {
		t.Errorf("exit code = %d, want 3", code)
	}
	if got := out.String(); got != "hi\n" {
		t.Errorf("stdout = %q, want %q", got, "hi\n")
	}
	if got := errOut.String(); got != "oops\n" {
		t.Errorf("stderr = %q, want %q", got, "oops\n")
	}
}

func TestStdinDelivered(t *testing.T) {
	t.Parallel()
	const input = "hello\nworld\n"
	var out syncBuffer
	cmd := exec.Command("cat")
	cmd.Stdin = strings.NewReader(input)
	cmd.Stdout = &out
	p := start(t, cmd)
	if code, err := wait(t, p); err != nil || code != 0 {
		t.Fatalf("Wait = %d, %v; want 0, nil", code, err)
	}
	if got := out.String(); got != input {
		t.Errorf("stdout = %q, want %q", got, input)
	}
}

func TestSignalledCommandExitCode(t *testing.T) {
	t.Parallel()
	p := start(t, exec.Command("sh", "-c", "kill -TERM $$"))
	code, err := wait(t, p)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if want := 128 + int(syscall.SIGTERM); code != want {
		t.Errorf("exit code = %d, want %d", code, want)
	}
}

func TestEnvIsExactlyTheCallers(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	cmd := exec.Command("env")
	cmd.Env = []string{"FOO=bar baz", "PATH=" + os.Getenv("PATH"), "WO_REAPER_SUPERVISE=1"}
	cmd.Stdout = &out
	p := start(t, cmd)
	if code, err := wait(t, p); err != nil || code != 0 {
		t.Fatalf("Wait = %d, %v; want 0, nil", code, err)
	}
	want := "FOO=bar baz\nPATH=" + os.Getenv("PATH") + "\n"
	if got := out.String(); got != want {
		t.Errorf("command environment = %q, want %q", got, want)
	}
}

func TestArgsAndEnvKeptByteForByte(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	cmd := exec.Command("/bin/sh", "-c", `printf '%s|%s' "$1" "$X"`, "sh", "a\xffb c")
	cmd.Env = []string{"X=d\xfe"}
	cmd.Stdout = &out
	p := start(t, cmd)
	if code, err := wait(t, p); err != nil || code != 0 {
		t.Fatalf("Wait = %d, %v; want 0, nil", code, err)
	}
	if got, want := out.String(), "a\xffb c|d\xfe"; got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
}

func TestDefaultEnvDirAndNoLeakedFDs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out syncBuffer
	cmd := exec.Command("sh", "-c", `
		echo "pwd=$(pwd -P)"
		echo "path=$PATH"
		echo "marker=${WO_REAPER_SUPERVISE-unset}"
		for fd in 3 4 5 6 7 8 9; do [ -e /proc/$$/fd/$fd ] && echo "leaked fd $fd"; done
		exit 0`)
	cmd.Dir = dir
	cmd.Stdout = &out
	p := start(t, cmd)
	if code, err := wait(t, p); err != nil || code != 0 {
		t.Fatalf("Wait = %d, %v; want 0, nil", code, err)
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := "pwd=" + realDir + "\npath=" + os.Getenv("PATH") + "\nmarker=unset\n"
	if got := out.String(); got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	started := exec.Command("true")
	if err := started.Run(); err != nil {
		t.Fatal(err)
	}
	withSys := exec.Command("true")
	withSys.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // only Credential is allowed
	withFiles := exec.Command("true")
	withFiles.ExtraFiles = []*os.File{os.Stdin}
	missingDir := exec.Command("true")
	missingDir.Dir = filepath.Join(dir, "missing")

	for name, cmd := range map[string]*exec.Cmd{
		"not found":      exec.Command("reaper-test-no-such-command"),
		"not executable": exec.Command(notExec),
		"missing dir":    missingDir,
		"started":        started,
		"SysProcAttr":    withSys,
		"ExtraFiles":     withFiles,
		"nil":            nil,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, err := reaper.Start(cmd)
			if err == nil {
				p.Kill()
				t.Fatalf("Start succeeded, want error")
			}
			t.Logf("Start error: %v", err)
		})
	}
}

// TestKillSweepsSetsidGrandchild: Kill must also kill a grandchild that left
// the command's session and process group.
func TestKillSweepsSetsidGrandchild(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd, token := tagged(exec.Command("sh", "-c", `setsid sleep 300 & echo $! > pids; echo $$ >> pids; sleep 300`))
	cmd.Dir = dir
	p := start(t, cmd)
	pids := waitForPids(t, filepath.Join(dir, "pids"), 2)
	var tree []int
	waitFor(t, "command tree to have 3 processes", func() bool {
		tree = descendants(t, p.Pid())
		return len(tree) >= 3
	})
	ids := identify(t, append(pids, tree...))
	for _, id := range ids {
		if !id.alive() {
			t.Fatalf("pid %d is not running before Kill", id.pid)
		}
	}
	supervisor := identify(t, []int{p.Pid()})
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p.Pid())); err != nil || string(comm) != "wo-reaper\n" {
		t.Errorf("supervisor comm = %q, %v; want %q", comm, err, "wo-reaper\n")
	}

	begin := time.Now()
	if err := p.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	// Kill falls back to sweeping from outside only after 10 s; a fast
	// return shows the supervisor swept by itself.
	if elapsed := time.Since(begin); elapsed > 8*time.Second {
		t.Errorf("Kill took %v", elapsed)
	}
	// Kill returns once the supervisor is gone and it exits only after the
	// sweep, so nothing may be left at this point: no polling.
	requireGone(t, append(ids, supervisor...))
	requireNoSurvivors(t, token)
	code, err := wait(t, p)
	if err != nil {
		t.Fatalf("Wait after Kill: %v", err)
	}
	if want := 128 + int(syscall.SIGKILL); code != want {
		t.Errorf("exit code after Kill = %d, want %d", code, want)
	}
}

// TestExitSweepsLeftovers: background processes the command leaves behind
// when it exits normally are swept before Wait returns.
func TestExitSweepsLeftovers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd, token := tagged(exec.Command("sh", "-c", `setsid sleep 300 & echo $! > pids; sleep 300 & echo $! >> pids; exit 0`))
	cmd.Dir = dir
	p := start(t, cmd)
	code, err := wait(t, p)
	if err != nil || code != 0 {
		t.Fatalf("Wait = %d, %v; want 0, nil", code, err)
	}
	pids := readPids(t, filepath.Join(dir, "pids"))
	if len(pids) != 2 {
		t.Fatalf("recorded pids = %v, want 2", pids)
	}
	for _, pid := range pids {
		if st, err := reaper.ReadStat(pid); err == nil && st.State != 'Z' {
			t.Errorf("leftover pid %d still running after Wait (state %c)", pid, st.State)
		}
	}
	requireNoSurvivors(t, token)
}

// TestInterruptDeliversSIGINT: the command gets SIGINT and may exit
// gracefully with its own exit code.
func TestInterruptDeliversSIGINT(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	cmd, token := tagged(exec.Command("sh", "-c", `trap 'echo got-int; exit 7' INT; sleep 300 & echo ready; wait`))
	cmd.Stdout = &out
	p := start(t, cmd)
	waitFor(t, "command to install its trap", func() bool { return strings.Contains(out.String(), "ready") })
	if err := p.Interrupt(); err != nil {
		t.Fatalf("Interrupt: %v", err)
	}
	code, err := wait(t, p)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if code != 7 {
		t.Errorf("exit code = %d, want 7 (output %q)", code, out.String())
	}
	if got := out.String(); got != "ready\ngot-int\n" {
		t.Errorf("output = %q, want %q", got, "ready\ngot-int\n")
	}
	requireNoSurvivors(t, token) // the background sleep ignores SIGINT; the sweep got it
}

func TestSafeAfterExit(t *testing.T) {
	t.Parallel()
	p := start(t, exec.Command("sh", "-c", "exit 5"))
	for range 2 {
		if code, err := wait(t, p); err != nil || code != 5 {
			t.Fatalf("Wait = %d, %v; want 5, nil", code, err)
		}
	}
	for range 2 {
		if err := p.Interrupt(); err != nil {
			t.Errorf("Interrupt after exit: %v", err)
		}
		if err := p.Kill(); err != nil {
			t.Errorf("Kill after exit: %v", err)
		}
	}
	if code, err := wait(t, p); err != nil || code != 5 {
		t.Fatalf("Wait after Kill = %d, %v; want 5, nil", code, err)
	}
}

func TestKillConcurrentWithWait(t *testing.T) {
	t.Parallel()
	cmd, token := tagged(exec.Command("sh", "-c", "sleep 300 & setsid sleep 300 & wait"))
	p := start(t, cmd)
	type result struct {
		code int
		err  error
	}
	waits := make(chan result, 2)
	for range 2 {
		go func() {
			code, err := p.Wait()
			waits <- result{code, err}
		}()
	}
	waitFor(t, "command tree to have 3 processes", func() bool { return len(descendants(t, p.Pid())) >= 3 })
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if err := p.Interrupt(); err != nil {
				t.Errorf("Interrupt: %v", err)
			}
			if err := p.Kill(); err != nil {
				t.Errorf("Kill: %v", err)
			}
		})
	}
	wg.Wait()
	for range 2 {
		select {
		case r := <-waits:
			if r.err != nil {
				t.Errorf("Wait: %v", r.err)
			}
		case <-time.After(deadline):
			t.Fatal("Wait did not return after Kill")
		}
	}
	requireNoSurvivors(t, token)
}

// TestKillWhileForking: a command that keeps forking session leaders is
// swept completely.
func TestKillWhileForking(t *testing.T) {
	t.Parallel()
	cmd, token := tagged(exec.Command("sh", "-c", `i=0; while [ $i -lt 2000 ]; do setsid sh -c 'sleep 300 & sleep 300' & i=$((i+1)); done; wait`))
	p := start(t, cmd)
	waitFor(t, "command to fork 30 processes", func() bool { return len(descendants(t, p.Pid())) >= 30 })
	if err := p.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	requireNoSurvivors(t, token)
}

// TestWorkerKilledWithSIGKILL is the important one: when the worker dies
// with kill -9, the supervisor notices and kills the whole command tree,
// including a process in its own session. Each trigger (liveness pipe EOF,
// parent-death signal) must suffice on its own.
func TestWorkerKilledWithSIGKILL(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{bothTriggers, pipeOnly, pdeathsigOnly} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			testWorkerKilled(t, mode)
		})
	}
}

func testWorkerKilled(t *testing.T, mode string) {
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	worker, token := tagged(exec.Command(exe))
	worker.Env = append(worker.Env, fakeWorkerEnv+"="+mode, fakeWorkerDirEnv+"="+dir)
	var stderr syncBuffer
	worker.Stderr = &stderr
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = worker.Process.Kill()
		_ = worker.Wait()
		if t.Failed() {
			t.Logf("fake worker stderr: %q", stderr.String())
		}
	})

	pids := waitForPids(t, filepath.Join(dir, "pids"), 3)
	supPid := waitForPids(t, filepath.Join(dir, "supervisor"), 1)[0]
	t.Cleanup(func() { reapOrphan(supPid) })
	if mode == pdeathsigOnly {
		holder := identify(t, waitForPids(t, filepath.Join(dir, "holder"), 1))[0]
		t.Cleanup(func() {
			_ = syscall.Kill(holder.pid, syscall.SIGKILL)
			waitFor(t, "holder to exit", func() bool { reapOrphan(holder.pid); return !holder.alive() })
		})
	}
	ids := identify(t, append(append(pids, supPid), descendants(t, supPid)...))
	for _, id := range ids {
		if !id.alive() {
			t.Fatalf("pid %d is not running before the worker is killed", id.pid)
		}
	}

	if err := worker.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 worker: %v", err)
	}
	_ = worker.Wait()

	waitFor(t, "supervisor and every process of the command to be gone", func() bool {
		reapOrphan(supPid)
		return !slices.ContainsFunc(ids, procID.alive)
	})
	requireNoSurvivors(t, token)
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	rest := " 1 2 3 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 98765 1000 100"
	tests := []struct {
		name string
		data string
		want reaper.ProcStat
	}{
		{"plain", "123 (sleep) S 42" + rest, reaper.ProcStat{State: 'S', PPid: 42, PGrp: 1, StartTime: 98765}},
		{"spaces and parens in comm", "123 (a) b (c) ) Z 7" + rest, reaper.ProcStat{State: 'Z', PPid: 7, PGrp: 1, StartTime: 98765}},
		{"empty comm", "9 () R 1" + rest + "\n", reaper.ProcStat{State: 'R', PPid: 1, PGrp: 1, StartTime: 98765}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := reaper.ParseStat([]byte(tt.data))
			if err != nil {
				t.Fatalf("ParseStat: %v", err)
			}
			if got != tt.want {
				t.Errorf("ParseStat = %+v, want %+v", got, tt.want)
			}
		})
	}
	for _, bad := range []string{"", "123 (sleep S 1 2", "123 (x) S 1 2 3", "123 (x) S notanumber" + rest} {
		if got, err := reaper.ParseStat([]byte(bad)); err == nil {
			t.Errorf("ParseStat(%q) = %+v, want error", bad, got)
		}
	}
	self, err := reaper.ReadStat(os.Getpid())
	if err != nil {
		t.Fatalf("ReadStat(self): %v", err)
	}
	if self.PPid != os.Getppid() {
		t.Errorf("ReadStat(self) = %+v, want ppid %d", self, os.Getppid())
	}
}

// start starts cmd under a supervisor and makes sure it is killed when the
// test ends.
func start(t *testing.T, cmd *exec.Cmd) *reaper.Process {
	t.Helper()
	p, err := reaper.Start(cmd)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Kill(); err != nil {
			t.Errorf("cleanup Kill: %v", err)
		}
	})
	return p
}

// wait is p.Wait, failing the test if it does not return within deadline.
func wait(t *testing.T, p *reaper.Process) (int, error) {
	t.Helper()
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := p.Wait()
		done <- result{code, err}
	}()
	select {
	case r := <-done:
		return r.code, r.err
	case <-time.After(deadline):
		t.Fatalf("Wait did not return within %v", deadline)
		return 0, nil
	}
}

// tagged adds a unique token to cmd's environment (inherited by everything
// it starts) and returns it.
func tagged(cmd *exec.Cmd) (*exec.Cmd, string) {
	token := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	cmd.Env = append(os.Environ(), tokenEnv+"="+token)
	return cmd, token
}

// requireNoSurvivors fails if any live process carries token.
func requireNoSurvivors(t *testing.T, token string) {
	t.Helper()
	if pids := survivors(t, token); len(pids) > 0 {
		killPids(pids)
		t.Fatalf("processes left behind: %v", pids)
	}
}

func survivors(t *testing.T, token string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	needle := []byte(tokenEnv + "=" + token + "\x00")
	var found []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(env, needle) {
			continue // gone, zombie (empty environ) or not ours
		}
		if st, err := reaper.ReadStat(pid); err == nil && st.State != 'Z' {
			found = append(found, pid)
		}
	}
	return found
}

func killPids(pids []int) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// procID identifies a process across pid reuse.
type procID struct {
	pid   int
	start uint64
}

func identify(t *testing.T, pids []int) []procID {
	t.Helper()
	ids := make([]procID, 0, len(pids))
	for _, pid := range pids {
		st, err := reaper.ReadStat(pid)
		if err != nil {
			t.Fatalf("identify: %v", err)
		}
		ids = append(ids, procID{pid: pid, start: st.StartTime})
	}
	t.Cleanup(func() { // never leave processes behind, even on failure
		for _, id := range ids {
			if id.alive() {
				_ = syscall.Kill(id.pid, syscall.SIGKILL)
			}
		}
	})
	return ids
}

// alive reports whether the process still runs: it exists, is not a zombie
// and its pid was not reused.
func (id procID) alive() bool {
	st, err := reaper.ReadStat(id.pid)
	return err == nil && st.StartTime == id.start && st.State != 'Z' && st.State != 'X'
}

func requireGone(t *testing.T, ids []procID) {
	t.Helper()
	for _, id := range ids {
		if id.alive() {
			t.Errorf("pid %d still running", id.pid)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// reapOrphan reaps pid if it was reparented to this (subreaper) process and
// has exited.
func reapOrphan(pid int) {
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
}

func descendants(t *testing.T, pid int) []int {
	t.Helper()
	pids, err := reaper.Descendants(pid)
	if err != nil {
		t.Fatalf("descendants of %d: %v", pid, err)
	}
	return pids
}

// waitForPids waits until path holds at least n complete lines of pids.
func waitForPids(t *testing.T, path string, n int) []int {
	t.Helper()
	var pids []int
	waitFor(t, fmt.Sprintf("%d pids in %s", n, filepath.Base(path)), func() bool {
		pids = readPids(t, path)
		return len(pids) >= n
	})
	return pids
}

// readPids returns the pids on the complete lines of path (none if absent).
func readPids(t *testing.T, path string) []int {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	lines := strings.Split(string(data), "\n")
	for _, line := range lines[:len(lines)-1] { // the last element is an incomplete line or ""
		pid, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			t.Fatalf("%s: bad pid line %q", path, line)
		}
		pids = append(pids, pid)
	}
	return pids
}

// waitFor polls cond until it holds, failing the test after deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", deadline, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent Write and String.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
