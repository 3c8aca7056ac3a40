package reaper_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/webordinary/webordinary/internal/reaper"
)

// Place runs while the supervisor waits for its command: it has no child yet, so nothing the
// command starts can be outside what Place did.
func TestPlaceRunsBeforeTheCommandStarts(t *testing.T) {
	t.Parallel()
	var children string
	placed := 0
	cmd := exec.Command("/bin/sh", "-c", "exit 7")
	p, err := reaper.StartWrapperIn(cmd, reaper.Placement{Place: func(pid int) error {
		placed = pid
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
		children = string(data)
		return err
	}})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(); err != nil || code != 7 {
		t.Fatalf("exit %d, %v; want 7", code, err)
	}
	if placed != p.Pid() || strings.TrimSpace(children) != "" {
		t.Fatalf("Place saw pid %d (supervisor %d) with children %q: want the supervisor, childless", placed, p.Pid(), children)
	}
}

// A Place that fails stops the supervisor before its command runs.
func TestPlaceErrorStopsTheSupervisor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mark := filepath.Join(dir, "ran")
	cmd := exec.Command("/bin/sh", "-c", "touch "+mark)
	_, err := reaper.StartWrapperIn(cmd, reaper.Placement{Place: func(int) error { return syscall.EPERM }})
	if err == nil || !strings.Contains(err.Error(), "place supervisor") {
		t.Fatalf("start with a failing Place: %v", err)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("the command ran although Place failed")
	}
}

// UseCgroupFD starts the supervisor, and so the command, in a cgroup v2 group.
func TestSupervisorStartsInTheCgroup(t *testing.T) {
	t.Parallel()
	mount := cgroup2Mount(t)
	dir := filepath.Join(mount, "wo-reaper-test-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("SKIPPED: cannot make a cgroup v2 group: %v", err)
	}
	defer os.Remove(dir)
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("/bin/cat", "/proc/self/cgroup")
	var out strings.Builder
	cmd.Stdout = &out
	p, err := reaper.StartWrapperIn(cmd, reaper.Placement{UseCgroupFD: true, CgroupFD: int(f.Fd())})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(); err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
	if want := "0::/" + filepath.Base(dir) + "\n"; !strings.Contains(out.String(), want) {
		t.Fatalf("the command's groups:\n%s\nwant %q", out.String(), want)
	}
}

// cgroup2Mount is where the unified hierarchy is mounted, when the test runs at its root.
func cgroup2Mount(t *testing.T) string {
	t.Helper()
	own, _ := os.ReadFile("/proc/self/cgroup")
	if !strings.Contains("\n"+string(own), "\n0::/\n") {
		t.Skip("SKIPPED: not at the root of the unified hierarchy")
	}
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(info), "\n") {
		if f := strings.Fields(line); len(f) > 8 && strings.Contains(line, " - cgroup2 ") {
			return f[4]
		}
	}
	t.Skip("SKIPPED: no cgroup v2 mount")
	return ""
}
