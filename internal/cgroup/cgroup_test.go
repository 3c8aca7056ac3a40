package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// opened returns the hierarchy Open finds, or skips saying why there is none.
func opened(t *testing.T) *Hierarchy {
	t.Helper()
	h, err := Open()
	if err != nil {
		t.Skipf("SKIPPED: %v", err)
	}
	return h
}

// inGroup reports whether /proc/pid/cgroup puts pid in group g.
func inGroup(t *testing.T, pid int, g *Group) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(data), "/"+filepath.Base(g.any())+"\n")
}

func TestPlaceCountsAndKillsTheTree(t *testing.T) {
	t.Parallel()
	h := opened(t)
	g, err := h.New(Limits{Memory: 64 << 20, Pids: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Remove()
	// The shell waits for a line on stdin before it forks: Place comes first.
	cmd := exec.Command("/bin/sh", "-c", `read go; for i in $(seq 20); do sleep 600 & done; wait`)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := g.Place(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if !inGroup(t, cmd.Process.Pid, g) {
		t.Fatalf("pid %d not in %s after Place", cmd.Process.Pid, g.any())
	}
	in.Write([]byte("go\n"))
	waitStats(t, g, func(st Stats) bool { return st.PidsMax > 0 })
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("the shell outlived its group's removal")
	}
	for _, d := range g.dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("%s still there: %v", d, err)
		}
	}
}

func TestMemoryIsBoundedForTheTree(t *testing.T) {
	t.Parallel()
	// Four children of 40 MiB each: under the limit alone, over it together.
	st := oomKilled(t, opened(t), Limits{Memory: 64 << 20, Pids: 64},
		`for i in 1 2 3 4; do (head -c 40M /dev/zero | tail -c 40M >/dev/null; sleep 600) & done; wait`)
	if st.MemoryFull == 0 {
		t.Errorf("killed at its own limit, but MemoryFull is 0: %+v", st)
	}
}

// TestAnOOMAboveTheGroupIsNotItsLimit: memory ran out above the job's group (here a parent
// group with a small limit stands for the host). The job's process is killed, but the group's
// counters must not say it went over its own limit: the job is not to blame.
func TestAnOOMAboveTheGroupIsNotItsLimit(t *testing.T) {
	t.Parallel()
	host := hostWithLittleMemory(t, opened(t), 64<<20)
	st := oomKilled(t, host, Limits{Memory: 1 << 30, Pids: 64}, `head -c 200M /dev/zero | tail -c 200M >/dev/null; sleep 600`)
	if st.MemoryFull != 0 {
		t.Errorf("memory ran out above the group, yet its counters say it reached its own limit: %+v", st)
	}
}

// oomKilled runs script in a new group of h with limits l, placed before the script starts,
// until an OOM kill shows in the group's counters; it removes the group and returns them.
func oomKilled(t *testing.T, h *Hierarchy, l Limits, script string) Stats {
	t.Helper()
	g, err := h.New(l)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Remove()
	cmd := exec.Command("/bin/sh", "-c", "read go; "+script)
	in, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := g.Place(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	in.Write([]byte("go\n"))
	st := waitStats(t, g, func(st Stats) bool { return st.OOMKills > 0 })
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	return st
}

// hostWithLittleMemory returns a hierarchy whose groups are made under a new group of h's
// parent limited to mem bytes (no swap), removed at the test's end.
func hostWithLittleMemory(t *testing.T, h *Hierarchy, mem int64) *Hierarchy {
	t.Helper()
	name := fmt.Sprintf("test-host-%d-%d", os.Getpid(), time.Now().UnixNano())
	host := &Hierarchy{version: h.version, parent: map[string]string{}, cpu: h.cpu}
	v := strconv.FormatInt(mem, 10)
	for c, p := range h.parent {
		d := filepath.Join(p, name)
		if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) { // co-mounted controllers
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rmdir(d) })
		host.parent[c] = d
	}
	var files [][2]string
	if h.version == 2 {
		files = [][2]string{{"memory.max", v}, {"memory.swap.max", "0"}, {"cgroup.subtree_control", "+memory +pids"}}
	} else {
		files = [][2]string{{"memory.limit_in_bytes", v}, {"memory.memsw.limit_in_bytes", v}}
	}
	dir := host.Dir()
	for _, f := range files {
		if err := write(dir, f[0], f[1]); err != nil && !optional(dir, f[0]) {
			t.Fatal(err)
		}
	}
	return host
}

// The unified hierarchy here may have no controllers (a hybrid host): a group without limits
// is still made, entered at start (clone3), killed whole and removed.
func TestV2GroupEnteredAtStart(t *testing.T) {
	t.Parallel()
	mounts, err := readMounts("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	own, err := readOwn("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	h, err := openV2(mounts, own, nil)
	if err != nil {
		t.Skipf("SKIPPED: no writable cgroup v2 hierarchy: %v", err)
	}
	g, err := h.New(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Remove()
	cmd := exec.Command("/bin/sh", "-c", `sleep 600 & sleep 600 & wait`)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: g.FD()}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !inGroup(t, cmd.Process.Pid, g) {
		t.Fatalf("pid %d not in %s", cmd.Process.Pid, g.any())
	}
	if _, err := g.Stats(); err != nil && !os.IsNotExist(err) {
		t.Logf("stats without controllers: %v", err)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("the shell outlived its group's removal")
	}
}

func waitStats(t *testing.T, g *Group, ok func(Stats) bool) Stats {
	t.Helper()
	for {
		st, err := g.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if ok(st) {
			t.Logf("stats: %+v", st)
			return st
		}
		procsLeft, _ := procs(g.any())
		if len(procsLeft) == 0 {
			t.Fatalf("group emptied before the condition: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestParseMount(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]mount{
		"35 25 0:30 / /sys/fs/cgroup/memory rw,relatime shared:13 - cgroup cgroup rw,memory":                  {dir: "/sys/fs/cgroup/memory", root: "/", controllers: []string{"memory"}},
		"36 25 0:31 /a\\040b /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct":                    {dir: "/sys/fs/cgroup/cpu,cpuacct", root: "/a b", controllers: []string{"cpu", "cpuacct"}},
		"37 25 0:32 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot": {dir: "/sys/fs/cgroup", root: "/", v2: true},
	} {
		got, ok := parseMount(line)
		if !ok || got.dir != want.dir || got.root != want.root || got.v2 != want.v2 || strings.Join(got.controllers, ",") != strings.Join(want.controllers, ",") {
			t.Errorf("parseMount(%q) = %+v, %v; want %+v", line, got, ok, want)
		}
	}
	if _, ok := parseMount("22 1 0:20 / /proc rw - proc proc rw"); ok {
		t.Error("proc parsed as a cgroup mount")
	}
}

// BenchmarkGroup is what a group adds to a job process: made with limits, the process placed
// in it (v1: its pid written), its counters read, the group removed. The process itself
// (/bin/true) is started and waited for in every case.
//
//	go test ./internal/cgroup -run '^$' -bench Group -benchtime 200x -count 5
func BenchmarkGroup(b *testing.B) {
	h, err := Open()
	if err != nil {
		b.Skipf("SKIPPED: %v", err)
	}
	run := func(b *testing.B, g *Group) {
		cmd := exec.Command("/bin/true")
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		if g != nil {
			_ = g.Place(cmd.Process.Pid) // may have exited already; the cost is the same
		}
		_ = cmd.Wait()
	}
	b.Run("process", func(b *testing.B) {
		for b.Loop() {
			run(b, nil)
		}
	})
	b.Run("process+group", func(b *testing.B) {
		for b.Loop() {
			g, err := h.New(Limits{Memory: 2 << 30, Pids: 280})
			if err != nil {
				b.Fatal(err)
			}
			run(b, g)
			if _, err := g.Stats(); err != nil {
				b.Fatal(err)
			}
			if err := g.Remove(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Under systemd delegation the platform's own group must hold no process once its children
// have controllers: moveAll moves them to a leaf.
func TestV2MoveToLeaf(t *testing.T) {
	t.Parallel()
	mounts, _ := readMounts("/proc/self/mountinfo")
	own, _ := readOwn("/proc/self/cgroup")
	h, err := openV2(mounts, own, nil)
	if err != nil {
		t.Skipf("SKIPPED: no writable cgroup v2 hierarchy: %v", err)
	}
	g, err := h.New(Limits{}) // stands for the service's delegated group
	if err != nil {
		t.Fatal(err)
	}
	leaf := filepath.Join(g.any(), "platform")
	defer func() { _ = rmdir(leaf); _ = g.Remove() }()
	cmd := exec.Command("/bin/sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: g.FD()}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if err := moveAll(g.any(), leaf); err != nil {
		t.Fatal(err)
	}
	if left, _ := procs(g.any()); len(left) != 0 {
		t.Fatalf("processes left in the group: %v", left)
	}
	if in, _ := procs(leaf); len(in) != 1 || in[0] != cmd.Process.Pid {
		t.Fatalf("leaf holds %v, want [%d]", in, cmd.Process.Pid)
	}
}

// BenchmarkStats is one read of a group's counters, what a running job's watcher does ten
// times a second.
//
//	go test ./internal/cgroup -run '^$' -bench Stats
func BenchmarkStats(b *testing.B) {
	h, err := Open()
	if err != nil {
		b.Skipf("SKIPPED: %v", err)
	}
	g, err := h.New(Limits{Memory: 2 << 30, Pids: 280})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Remove()
	for b.Loop() {
		if _, err := g.Stats(); err != nil {
			b.Fatal(err)
		}
	}
}

// A platform restarted with the pid of one that died (a container's pid 1) finds that one's
// groups under its next names: New takes the next free name rather than failing (Open's trial
// group failed, so the platform fell back to rlimits), and removing stale groups removes
// those it can tell apart (made by a process of another start time). Not parallel: it predicts
// the names New picks next.
func TestGroupsOfAnEarlierPlatformWithOurPid(t *testing.T) {
	h := opened(t)
	var made, earlier []string
	mkdirs := func(name string) []string {
		var out []string
		for _, d := range h.group(name).dirs {
			if err := os.Mkdir(d, 0o755); err == nil {
				out = append(out, d)
			}
		}
		made = append(made, out...)
		return out
	}
	t.Cleanup(func() {
		for _, d := range made {
			_ = syscall.Rmdir(d)
		}
	})
	// The group at the first name New tries holds a process: New must not touch it.
	busy := h.group(h.name(h.seq.Load() + 1))
	sleeper := exec.Command("sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = busy.Kill(); _ = sleeper.Wait() })
	for i := uint64(1); i <= 3; i++ {
		n := h.seq.Load() + i
		mkdirs(h.name(n))
		if i == 1 {
			if err := busy.Place(sleeper.Process.Pid); err != nil {
				t.Fatal(err)
			}
		}
		earlier = append(earlier, mkdirs(fmt.Sprintf("job-%d-%d", os.Getpid(), n))...)
		earlier = append(earlier, mkdirs(fmt.Sprintf("job-%d-%d-%d", os.Getpid(), 1, n))...)
	}
	g, err := h.New(Limits{})
	if st, _ := os.ReadFile("/proc/" + strconv.Itoa(sleeper.Process.Pid) + "/stat"); !alive(st) {
		t.Fatalf("New killed the process of a group it did not make: %s", st)
	}
	if err != nil {
		t.Fatalf("New beside an earlier platform's groups: %v", err)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	h.removeStale()
	for _, d := range earlier {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("an earlier platform's group %s left: %v", d, err)
		}
	}
}

// A group whose platform this one cannot see (another pid namespace sharing the hierarchy, or
// its pid reused) is never killed by the removal of stale groups: only empty ones go.
func TestStaleRemovalKillsNothing(t *testing.T) {
	h := opened(t)
	g := h.group("job-999999999-1") // a pid no process has here
	for _, d := range g.dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = g.Remove() })
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if err := g.Place(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	h.removeStale()
	if st, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/stat"); !alive(st) {
		t.Fatalf("a process of a group of another platform was killed: %s", st)
	}
	empty := h.group("job-999999999-2")
	for _, d := range empty.dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h.removeStale()
	for _, d := range empty.dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("empty stale group %s left: %v", d, err)
		}
	}
}

// alive reports whether a /proc/<pid>/stat shows a process that was not killed (no zombie).
func alive(stat []byte) bool {
	return len(stat) > 0 && !strings.Contains(string(stat), ") Z ") && !strings.Contains(string(stat), ") X ")
}

// v1 has no cgroup.kill: Kill lists the group's pids and signals each. A listed process that
// exits between the two may leave its pid to a program outside the group (a job can churn
// pids; pid_max is often 32768): that program is not killed. Here the pid given as listed is
// an outside process's from the start.
func TestKillSparesAPidThatLeftTheGroup(t *testing.T) {
	t.Parallel()
	h := opened(t)
	g, err := h.New(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Remove()
	outside := exec.Command("sleep", "600")
	if err := outside.Start(); err != nil {
		t.Fatal(err)
	}
	killListed(g.any(), []int{outside.Process.Pid})
	// A signal sent by kill(2) is pending once it returns: the process dies of the first one.
	_ = outside.Process.Signal(syscall.SIGTERM)
	_ = outside.Wait()
	if ws := outside.ProcessState.Sys().(syscall.WaitStatus); ws.Signal() != syscall.SIGTERM {
		t.Fatalf("a process outside the group was killed by %v", ws.Signal())
	}
}
