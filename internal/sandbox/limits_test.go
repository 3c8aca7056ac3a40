package sandbox_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/capability"
	"github.com/webordinary/webordinary/internal/sandbox"
)

// small are limits small enough that an attack hits them fast without troubling the machine.
var small = sandbox.Limits{Memory: 64 << 20, Procs: 32, Disk: 32 << 20, Tmp: 16 << 20, CPU: time.Second}

// limited returns a sandbox whose jobs can run the test binary (the rlimit shim), and a tenant.
func limited(t testing.TB) (*sandbox.Sandbox, tenant) {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := required(t, root)
	return s, newTenant(t, s)
}

// limitedJail is tn's jail with the small limits.
func limitedJail(t *testing.T, s *sandbox.Sandbox, tn tenant) *sandbox.Jail {
	t.Helper()
	spec := tn.spec()
	spec.Limits = small
	return s.Jail(spec)
}

// wantLimit checks that the job failed and that the jail explains it as key's limit.
func wantLimit(t *testing.T, j *sandbox.Jail, key, out string, code int) {
	t.Helper()
	if code == 0 {
		t.Fatalf("the job succeeded over its %s limit: %s", key, out)
	}
	err := j.Explain(code, out)
	var le *sandbox.LimitError
	if !errors.As(err, &le) || le.Key != key || !errors.Is(err, sandbox.ErrLimit) {
		t.Fatalf("exit %d explained as %v, want the %s limit; output: %s", code, err, key, out)
	}
	t.Logf("operator: %v", err)
}

func TestForkBombIsCapped(t *testing.T) {
	t.Parallel()
	s, tn := limited(t)
	j := limitedJail(t, s, tn)
	out, code := runIn(t, j, tn.ws, `i=0; while [ $i -lt 400 ]; do sleep 600 & i=$((i+1)); done; echo all started`)
	if strings.Contains(out, "all started") {
		t.Fatalf("400 processes started under procs=32: %s", out)
	}
	wantLimit(t, j, "procs", out, code)
}

// RLIMIT_NPROC counts per user in a user namespace: jobs of the same uid do not share it.
func TestProcsAreCountedPerJob(t *testing.T) {
	t.Parallel()
	s, a := limited(t)
	b := newTenant(t, s)
	ja := limitedJail(t, s, a)
	cmd := exec.Command("/bin/sh", "-c", `for i in $(seq 20); do sleep 600 & done; touch ready; wait`)
	cmd.Dir, cmd.Env = a.ws, []string{"PATH=/usr/bin:/bin"}
	p, err := ja.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	waitFor(t, filepath.Join(a.ws, "ready"))
	out, code := runIn(t, limitedJail(t, s, b), b.ws, `for i in $(seq 20); do sleep 600 & done; echo all started`)
	if code != 0 || !strings.Contains(out, "all started") {
		t.Fatalf("a second job of the same uid could not start 20 processes under procs=32 while the first ran 20 (exit %d): %s", code, out)
	}
}

// waitFor waits for path to exist.
func waitFor(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBigAllocationIsStopped(t *testing.T) {
	t.Parallel()
	s, tn := limited(t)
	j := limitedJail(t, s, tn)
	attacks := map[string]string{
		"python":         `python3 -c 'b = bytearray(1 << 30); print("allocated")'`,
		"tail of a line": `head -c 512M /dev/zero | tail -c 300M > /dev/null && echo allocated`,
	}
	for name, script := range attacks {
		out, code := runIn(t, j, tn.ws, script)
		if strings.Contains(out, "allocated") {
			t.Fatalf("%s: allocated over mem=64MiB: %s", name, out)
		}
		wantLimit(t, j, "mem", out, code)
	}
}

// Node's V8 reserves much address space; the memory limit bounds what it uses, not that.
func TestNodeRunsUnderTheMemoryLimit(t *testing.T) {
	t.Parallel()
	capability.Need(t, capability.Node)
	s, tn := limited(t)
	spec := tn.spec()
	spec.Limits = sandbox.Limits{Memory: 256 << 20}
	j := s.Jail(spec)
	if out, code := runIn(t, j, tn.ws, `node -e 'const a = []; for (let i = 0; i < 50; i++) a.push(new Array(1e5).fill(i)); console.log("ok", a.length)'`); code != 0 || !strings.Contains(out, "ok 50") {
		t.Fatalf("node failed under mem=256MiB (exit %d): %s", code, out)
	}
	out, code := runIn(t, j, tn.ws, `node -e 'const a = []; for (let i = 0; i < 64; i++) a.push(Buffer.alloc(16 << 20, 1)); console.log("allocated")'`)
	wantLimit(t, j, "mem", out, code)
}

func TestTmpIsBounded(t *testing.T) {
	t.Parallel()
	s, tn := limited(t)
	j := limitedJail(t, s, tn)
	for _, dir := range []string{"/tmp", "/var/tmp", "/dev/shm"} {
		out, code := runIn(t, j, tn.ws, `head -c 24M /dev/zero > `+dir+`/fill && echo written`)
		if code == 0 || strings.Contains(out, "written") || !strings.Contains(out, "No space left") {
			t.Fatalf("%s: wrote 24 MiB under tmp=16MiB (exit %d): %s", dir, code, out)
		}
	}
	// The rest of /dev takes no files (an unsized tmpfs otherwise), and its devices still work.
	out, code := runIn(t, j, tn.ws, `echo x > /dev/fill; echo y > /dev/null && echo devices-work`)
	if strings.Contains(out, "No space") || !strings.Contains(out, "Read-only") || !strings.Contains(out, "devices-work") {
		t.Fatalf("/dev (exit %d): %s", code, out)
	}
}

func TestCPUBurnIsBounded(t *testing.T) {
	t.Parallel()
	s, tn := limited(t)
	j := limitedJail(t, s, tn)
	// timeout: a bound on the test where the limit is missing.
	out, code := runIn(t, j, tn.ws, `timeout 300 sh -c 'while :; do :; done'`)
	wantLimit(t, j, "cpu", out, code)
}

func TestDiskIsBounded(t *testing.T) {
	t.Parallel()
	s, tn := limited(t)
	j := limitedJail(t, s, tn)
	out, code := runIn(t, j, tn.ws, `head -c 40M /dev/zero > big && echo written`)
	if strings.Contains(out, "written") {
		t.Fatalf("wrote a 40 MiB file under disk=32MiB: %s", out)
	}
	wantLimit(t, j, "disk", out, code)
	// Files each under the limit, together over it: found by the check after the process.
	// The link to / is not followed.
	out, code = runIn(t, j, tn.ws, `rm big && ln -s / root && for i in 1 2; do head -c 12M /dev/zero > f$i; done`)
	if code != 0 {
		t.Fatalf("writing two 12 MiB files: exit %d: %s", code, out)
	}
	if err := j.CheckDisk(); err != nil {
		t.Fatalf("24 MiB under disk=32MiB: %v", err)
	}
	if out, code = runIn(t, j, tn.ws, `head -c 12M /dev/zero > f3`); code != 0 {
		t.Fatalf("writing a third 12 MiB file: exit %d: %s", code, out)
	}
	err := j.CheckDisk()
	var le *sandbox.LimitError
	if !errors.As(err, &le) || le.Key != "disk" {
		t.Fatalf("36 MiB in files of 12 MiB under disk=32MiB: CheckDisk says %v", err)
	}
	// Sparse files take no blocks, but a deploy copies their whole size: they count at it.
	if out, code = runIn(t, j, tn.ws, `rm f1 f2 f3 && truncate -s 12M s1 s2 s3`); code != 0 {
		t.Fatalf("making sparse files: exit %d: %s", code, out)
	}
	if err := j.CheckDisk(); !errors.As(err, &le) || le.Key != "disk" {
		t.Fatalf("36 MiB of sparse files under disk=32MiB: CheckDisk says %v", err)
	}
}

func TestParseLimits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want sandbox.Limits
		err  string
	}{
		{in: "", want: sandbox.Limits{}},
		{in: "mem=2GiB,procs=256,disk=2G,tmp=512MiB,cpu=10m",
			want: sandbox.Limits{Memory: 2 << 30, Procs: 256, Disk: 2 << 30, Tmp: 512 << 20, CPU: 10 * time.Minute}},
		{in: "mem=off, procs=64", want: sandbox.Limits{Memory: sandbox.Unlimited, Procs: 64}},
		{in: "mem=1024", err: "too small"},
		{in: "memory=2GiB", err: `unknown limit "memory"`},
		{in: "mem", err: "not name=value"},
		{in: "procs=-3", err: "not a count"},
		{in: "cpu=10", err: "not a duration"},
		{in: "disk=2XB", err: "not a size"},
	}
	for _, c := range cases {
		got, err := sandbox.ParseLimits(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseLimits(%q) = %v, want an error with %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseLimits(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
		if again, err := sandbox.ParseLimits(got.String()); err != nil || again != got {
			t.Errorf("ParseLimits(%q.String() = %q) = %+v, %v", c.in, got.String(), again, err)
		}
	}
}

func TestStatusShowsTheLimits(t *testing.T) {
	t.Parallel()
	s, _ := limited(t)
	st := s.Status()
	if want := "rlimits mem=2GiB,procs=256,disk=2GiB,tmp=512MiB"; st.Limits != want || !strings.Contains(s.String(), want) || !strings.Contains(s.Short(), want) {
		t.Fatalf("status limits %q, banner %q, presence %q: want %q", st.Limits, s.String(), s.Short(), want)
	}
	off, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeOff})
	if err != nil || off.Status().Limits != "" {
		t.Fatalf("sandbox off: %v, limits %q (none apply)", err, off.Status().Limits)
	}
}

// A job cannot raise its limits: they are hard limits, and the job has no privilege.
func TestJobCannotRaiseItsLimits(t *testing.T) {
	t.Parallel()
	s, tn := limited(t)
	j := limitedJail(t, s, tn)
	for _, script := range []string{"ulimit -p 100000", "ulimit -d unlimited", "ulimit -t unlimited", "ulimit -f unlimited"} {
		if out, code := runIn(t, j, tn.ws, script+" && echo raised"); code == 0 || strings.Contains(out, "raised") {
			t.Errorf("%s: the job raised its limit: %s", script, out)
		}
	}
}
