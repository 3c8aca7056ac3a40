package sandbox_test

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/sandbox"
)

// cgroups reports whether s gives each job process a control group.
func cgroups(s *sandbox.Sandbox) bool { return strings.HasPrefix(s.Status().Limits, "cgroup ") }

// grouped returns a sandbox whose jobs get control groups, and a tenant, or skips saying why
// there are none (then the limits are rlimits, which these attacks pass: see the README).
func grouped(t *testing.T) (*sandbox.Sandbox, tenant) {
	t.Helper()
	s, tn := limited(t)
	if !cgroups(s) {
		t.Skipf("SKIPPED: no control groups here (%s); the attack on rlimits alone is not tested", s.Status().NoCgroup)
	}
	return s, tn
}

// jobBound bounds a hostile job in these tests: a job its limits do not stop runs this long
// (its own sleeps are longer) and the test fails.
const jobBound = 3 * time.Minute

// runBounded is runIn for a job that may not end by itself: it is killed after jobBound, and
// the test fails.
func runBounded(t *testing.T, j *sandbox.Jail, dir, script string) (string, int) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir, cmd.Env = dir, []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	p, err := j.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() { code, _ := p.Wait(); done <- code }()
	select {
	case code := <-done:
		t.Logf("the job ended after %v with exit %d", time.Since(start).Round(time.Millisecond), code)
		return out.String(), code
	case <-time.After(jobBound):
		p.Kill()
		t.Fatalf("the job still ran after %v: nothing stopped it; output: %s", jobBound, out.String())
	}
	return "", 0
}

// wantOver checks that the job failed and that OverLimit, as the pipeline asks it, names
// key's limit.
func wantOver(t *testing.T, j *sandbox.Jail, key, out string, code int) {
	t.Helper()
	if code == 0 {
		t.Fatalf("the job succeeded over its %s limit: %s", key, out)
	}
	err := j.OverLimit(false, code, out)
	var le *sandbox.LimitError
	if !errors.As(err, &le) || le.Key != key || !errors.Is(err, sandbox.ErrLimit) {
		t.Fatalf("exit %d: OverLimit says %v, want the %s limit; output: %s", code, err, key, out)
	}
	t.Logf("operator: %v", err)
}

// Shared memory is not RLIMIT_DATA's: a job on the default limits (mem=2GiB) maps and
// touches 3 GiB of it.
func TestThreeGiBOfSharedMemoryIsKilled(t *testing.T) {
	t.Parallel()
	s, tn := grouped(t)
	j := s.Jail(tn.spec())
	out, code := runBounded(t, j, tn.ws, `python3 -c '
import mmap
m = mmap.mmap(-1, 3 << 30)
for i in range(0, len(m), 4096):
    m[i] = 1
print("allocated")'`)
	if strings.Contains(out, "allocated") {
		t.Fatalf("a job on the default limits used 3 GiB: %s", out)
	}
	wantOver(t, j, "mem", out, code)
}

// Four children of 100 MiB each: each under an rlimit of 256 MiB, together over it.
func TestChildrenTogetherOverTheMemoryLimit(t *testing.T) {
	t.Parallel()
	s, tn := grouped(t)
	spec := tn.spec()
	spec.Limits = sandbox.Limits{Memory: 256 << 20}
	j := s.Jail(spec)
	out, code := runBounded(t, j, tn.ws, `
for i in 1 2 3 4; do
  python3 -c 'import sys, time; b = b"x" * (100 << 20); open(sys.argv[1], "w").close(); time.sleep(600)' r$i &
done
until [ -e r1 ] && [ -e r2 ] && [ -e r3 ] && [ -e r4 ]; do sleep 0.05; done
echo all allocated`)
	if strings.Contains(out, "all allocated") {
		t.Fatalf("four children held 400 MiB under mem=256MiB: %s", out)
	}
	wantOver(t, j, "mem", out, code)
}

// A fork bomb that hides its failures: 500 processes asked on the default limits (procs=256),
// fork errors swallowed, nothing printed. It is stopped, and named, without its words.
func TestQuietForkBombIsStoppedAndNamed(t *testing.T) {
	t.Parallel()
	s, tn := grouped(t)
	j := s.Jail(tn.spec())
	out, code := runBounded(t, j, tn.ws, `python3 -c '
import os, time
for i in range(500):
    try:
        if os.fork() == 0:
            time.sleep(600)
            os._exit(0)
    except OSError:
        pass
time.sleep(600)' 2>/dev/null`)
	wantOver(t, j, "procs", out, code)
}

// Where no control group can be made, the limits are today's rlimits: the status says so and
// why, and a fork bomb and a big allocation are still stopped and named.
func TestRlimitsWithoutCgroups(t *testing.T) {
	t.Parallel()
	s, tn := limited(t)
	sandbox.WithoutCgroups(s)
	st := s.Status()
	if !strings.HasPrefix(st.Limits, sandbox.LimitsMode+" ") || st.NoCgroup == "" || !strings.Contains(s.String(), "no cgroup") {
		t.Fatalf("status %+v, banner %q: want rlimits and why", st, s.String())
	}
	j := limitedJail(t, s, tn)
	out, code := runIn(t, j, tn.ws, `i=0; while [ $i -lt 400 ]; do sleep 600 & i=$((i+1)); done; echo all started`)
	if strings.Contains(out, "all started") {
		t.Fatalf("400 processes started under procs=32: %s", out)
	}
	wantOver(t, j, "procs", out, code)
	out, code = runIn(t, j, tn.ws, `python3 -c 'b = bytearray(1 << 30); print("allocated")'`)
	wantOver(t, j, "mem", out, code)
}

// The status names the cgroup version where jobs get groups (root on this machine, or a
// delegated subtree).
func TestStatusNamesTheCgroupMode(t *testing.T) {
	t.Parallel()
	s, _ := limited(t)
	if !cgroups(s) {
		t.Skipf("SKIPPED: no control groups here (%s)", s.Status().NoCgroup)
	}
	if st := s.Status(); st.NoCgroup != "" || !strings.Contains(s.Short(), st.Limits) {
		t.Fatalf("status %+v, presence %q", st, s.Short())
	}
}

// Three busy processes, each stopped by RLIMIT_CPU at cpu=1s, whose shell then says all is
// well: their CPU time together passes the limit, and the job is stopped and named.
func TestCPUTogetherOverTheLimit(t *testing.T) {
	t.Parallel()
	s, tn := grouped(t)
	j := limitedJail(t, s, tn)
	out, code := runBounded(t, j, tn.ws, `for i in 1 2 3; do sh -c 'while :; do :; done' & done; wait; echo survived`)
	if strings.Contains(out, "survived") {
		t.Fatalf("three processes burnt their CPU time under cpu=1s and the job went on: %s", out)
	}
	wantOver(t, j, "cpu", out, code)
}

// TestProbesKillNoRunningJob: a job's supervisor is started with a parent-death signal, which
// fires when the thread that forked it ends. Probing a new sandbox (as serve and every test
// does) must never end a thread of the platform: the probes once ran on a locked goroutine
// that returned, and jobs of other sandboxes in the process died with exit 137.
func TestProbesKillNoRunningJob(t *testing.T) {
	t.Parallel()
	s, tn := limited(t)
	const jobs = 8
	results := make(chan int, jobs)
	for range jobs {
		cmd := exec.Command("/bin/sh", "-c", "sleep 3")
		cmd.Dir, cmd.Env = tn.ws, []string{"PATH=/usr/bin:/bin", "HOME=" + tn.ws}
		p, err := s.Jail(tn.spec()).Start(cmd)
		if err != nil {
			t.Fatal(err)
		}
		go func() { code, _ := p.Wait(); results <- code }()
		required(t) // a probe on a fresh goroutine, while the jobs run
	}
	for range jobs {
		if code := <-results; code != 0 {
			t.Fatalf("a running job ended with exit %d while sandboxes were probed", code)
		}
	}
}
