package cgroup

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Limits bound a group's processes together; 0 leaves a limit unset.
type Limits struct {
	// Memory bounds the group's memory (anonymous, page cache, tmpfs it writes), swap off:
	// over it, the kernel reclaims and then kills a process of the group (OOM).
	Memory int64
	// Pids bounds the group's processes and threads: a fork over it fails (EAGAIN).
	Pids int64
}

// killTimeout bounds Kill's and Remove's wait for the group's processes to be gone.
const killTimeout = 5 * time.Second

// pollInterval is how long bounded loops wait between checks.
const pollInterval = 5 * time.Millisecond

// Group is one job process tree's control group. Stats, Place and Kill are safe for
// concurrent use; Remove is the last call (FD is invalid after it).
type Group struct {
	version int
	dirs    map[string]string // controller (v2: "") → the group's directory
	fd      *os.File          // v2: the open directory, for clone3
}

// nameTries bounds how many names New tries past groups an earlier platform left.
const nameTries = 100

// New makes a group with limits l under h's parent, at the next name no group has: one an
// earlier platform of the same pid left is passed over, never entered nor removed.
func (h *Hierarchy) New(l Limits) (*Group, error) {
	var g *Group
	for try := 1; ; try++ {
		g = h.group(h.name(h.seq.Add(1)))
		err := g.make()
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) || try == nameTries {
			return nil, fmt.Errorf("cgroup: make a job group: %w", err)
		}
	}
	if err := g.limit(l); err != nil {
		_ = g.Remove()
		return nil, err
	}
	if h.version == 2 {
		f, err := os.Open(g.dirs[""])
		if err != nil {
			_ = g.Remove()
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		g.fd = f
	}
	return g, nil
}

// make makes the group's directories. On failure it removes the ones it made, and only
// those: a directory that was there already is another's group, whose processes it must not
// touch.
func (g *Group) make() error {
	var made []string // co-mounted controllers (cpu,cpuacct) share a directory
	for _, d := range g.dirs {
		if slices.Contains(made, d) {
			continue
		}
		if err := os.Mkdir(d, 0o755); err != nil {
			for _, m := range made {
				_ = syscall.Rmdir(m)
			}
			return err
		}
		made = append(made, d)
	}
	return nil
}

// name is the group name of the platform's seq'th job process: job-<pid>-<start>-<seq>, start
// being the platform's start time, so that a later platform with the same pid (a container's
// pid 1, restarted) tells its groups from this one's.
func (h *Hierarchy) name(seq uint64) string {
	return fmt.Sprintf("job-%d-%d-%d", os.Getpid(), ownStart(), seq)
}

// ownStart is the platform's start time (see startTime).
var ownStart = sync.OnceValue(func() int64 { return startTime(int64(os.Getpid())) })

// startTime is when process pid started, in clock ticks after boot (/proc/<pid>/stat's 22nd
// field), -1 when there is no such process.
func startTime(pid int64) int64 {
	data, err := os.ReadFile("/proc/" + strconv.FormatInt(pid, 10) + "/stat")
	i := bytes.LastIndexByte(data, ')')
	if err != nil || i < 0 {
		return -1
	}
	f := strings.Fields(string(data[i+1:])) // from the 3rd field, the state
	if len(f) < 20 {
		return -1
	}
	n, err := strconv.ParseInt(f[19], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// group is the (possibly not yet made) group name under h's parent.
func (h *Hierarchy) group(name string) *Group {
	g := &Group{version: h.version, dirs: map[string]string{}}
	for c, p := range h.parent {
		g.dirs[c] = filepath.Join(p, name)
	}
	return g
}

// limit writes l to the group's control files: v2 memory.max, memory.swap.max, memory.oom.group
// (an OOM kill takes the whole group) and pids.max; v1 memory.limit_in_bytes,
// memory.memsw.limit_in_bytes (memory plus swap: no swap), memory.swappiness 0 and pids.max.
func (g *Group) limit(l Limits) error {
	mem, pids := g.dirs["memory"], g.dirs["pids"]
	if g.version == 2 {
		mem, pids = g.dirs[""], g.dirs[""]
	}
	var files [][2]string
	if l.Memory > 0 {
		v := strconv.FormatInt(l.Memory, 10)
		if g.version == 2 {
			files = append(files, [2]string{"memory.max", v}, [2]string{"memory.swap.max", "0"}, [2]string{"memory.oom.group", "1"})
		} else {
			files = append(files, [2]string{"memory.limit_in_bytes", v}, [2]string{"memory.memsw.limit_in_bytes", v},
				[2]string{"memory.swappiness", "0"}) // where memsw is not accounted
		}
	}
	for _, f := range files {
		if err := write(mem, f[0], f[1]); err != nil && !optional(mem, f[0]) {
			return err
		}
	}
	if l.Pids > 0 {
		return write(pids, "pids.max", strconv.FormatInt(l.Pids, 10))
	}
	return nil
}

// optional reports whether control file name may be missing from dir, and is: swap files
// where the kernel accounts no swap (then there is none to turn off), memory.oom.group
// before Linux 4.19 (then the job is killed whole after the first OOM kill, see Kill).
func optional(dir, name string) bool {
	if name != "memory.oom.group" && !strings.Contains(name, "swap") && !strings.Contains(name, "memsw") {
		return false
	}
	_, err := os.Stat(filepath.Join(dir, name))
	return errors.Is(err, os.ErrNotExist)
}

// FD is the group's directory for SysProcAttr.CgroupFD (v2), -1 on v1: start a process there
// and it is in the group from its first instruction.
func (g *Group) FD() int {
	if g.fd == nil {
		return -1
	}
	return int(g.fd.Fd())
}

// Place moves process pid (all its threads) into the group. The process must not fork until
// Place returns: its children would stay outside.
func (g *Group) Place(pid int) error {
	for _, d := range g.dirs {
		if err := write(d, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// Stats are what the kernel counted for a group.
type Stats struct {
	// OOMKills is how many of its processes an OOM killer killed: for the group's memory
	// limit, or for memory running out above it (an ancestor's limit, the whole host).
	OOMKills int64
	// MemoryFull is nonzero once the group's own memory limit was reached (v2: how many
	// OOMs the limit caused; v1: 1 when the group's peak use reached its limit, memory or
	// memory plus swap, since some kernels leave v1's failcnt at 0). An OOM kill with
	// MemoryFull at 0 came from above the group: the job is not to blame.
	MemoryFull int64
	// PidsMax is how many forks failed at its process limit.
	PidsMax int64
	// CPU is the CPU time its processes used (0 where not counted: v1 without cpuacct).
	CPU time.Duration
}

// Stats reads the group's counters.
func (g *Group) Stats() (Stats, error) {
	var r reader
	var st Stats
	if g.version == 2 {
		d := g.dirs[""]
		st.OOMKills = r.field(d, "memory.events", "oom_kill")
		st.MemoryFull = r.field(d, "memory.events", "oom")
		st.PidsMax = r.field(d, "pids.events", "max")
		st.CPU = time.Duration(r.field(d, "cpu.stat", "usage_usec")) * time.Microsecond
		return st, r.err
	}
	st.OOMKills = r.field(g.dirs["memory"], "memory.oom_control", "oom_kill")
	st.MemoryFull = r.peakAtLimit(g.dirs["memory"], "memory.")
	if !optional(g.dirs["memory"], "memory.memsw.max_usage_in_bytes") {
		st.MemoryFull += r.peakAtLimit(g.dirs["memory"], "memory.memsw.")
	}
	st.PidsMax = r.field(g.dirs["pids"], "pids.events", "max")
	if d := g.dirs["cpuacct"]; d != "" {
		st.CPU = time.Duration(r.number(d, "cpuacct.usage"))
	}
	return st, r.err
}

// reader reads control files, keeping the first error.
type reader struct{ err error }

// field reads "key value" from a flat-keyed control file of group dir; a key the kernel does
// not have (an older one) reads as 0.
func (r *reader) field(dir, name, key string) int64 {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		r.err = cmp.Or(r.err, fmt.Errorf("cgroup: %w", err))
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if k, v, _ := strings.Cut(sc.Text(), " "); k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// peakAtLimit is 1 when v1 group dir's peak use of counter prefix ("memory.",
// "memory.memsw.") reached its limit, else 0. Charges are whole pages and limits are
// rounded down to pages, so a limit that was reached is the peak exactly.
func (r *reader) peakAtLimit(dir, prefix string) int64 {
	peak, limit := r.number(dir, prefix+"max_usage_in_bytes"), r.number(dir, prefix+"limit_in_bytes")
	if r.err == nil && peak >= limit {
		return 1
	}
	return 0
}

// number reads a control file of group dir that holds one number.
func (r *reader) number(dir, name string) int64 {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		r.err = cmp.Or(r.err, fmt.Errorf("cgroup: %w", err))
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n
}

// Kill kills every process of the group (v2: cgroup.kill; v1, or a kernel before 5.14:
// SIGKILL to each, again until none is left, so a fork between listing and killing is
// caught) and returns once none is left, or with an error after killTimeout.
func (g *Group) Kill() error {
	dir := g.any()
	killed := g.version == 2 && write(dir, "cgroup.kill", "1") == nil
	deadline := time.Now().Add(killTimeout)
	for {
		pids, err := procs(dir)
		if errors.Is(err, os.ErrNotExist) || err == nil && len(pids) == 0 {
			return nil
		}
		if err != nil {
			return err
		}
		if !killed {
			killListed(dir, pids)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup: %d processes left in %s after %v", len(pids), dir, killTimeout)
		}
		time.Sleep(pollInterval)
	}
}

// killListed kills the processes pids, just listed in group dir, that are in it still. A
// listed process that exited since may have left its pid to a program outside the group (a job
// can churn pids): each pid is pinned with a pidfd, the group listed again, and only the
// pinned processes whose pid is still listed are signalled, through their pidfd. Where no
// pidfd can be had (before Linux 5.3, no fd left) a pid is signalled as listed.
func killListed(dir string, pids []int) {
	pinned := map[int]int{} // pid → pidfd
	defer func() {
		for _, fd := range pinned {
			_ = unix.Close(fd)
		}
	}()
	for _, pid := range pids {
		fd, err := unix.PidfdOpen(pid, 0)
		switch {
		case err == nil:
			pinned[pid] = fd
		case !errors.Is(err, syscall.ESRCH): // no pidfd here (ENOSYS), or no fd left
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if len(pinned) == 0 {
		return
	}
	still, err := procs(dir)
	if err != nil {
		return
	}
	for _, pid := range still {
		if fd, ok := pinned[pid]; ok {
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		}
	}
}

// any is one of the group's directories, where its processes are listed.
func (g *Group) any() string {
	if d, ok := g.dirs["memory"]; ok {
		return d
	}
	return g.dirs[""]
}

// Remove kills what is left in the group and removes it. Safe to call more than once.
func (g *Group) Remove() error {
	if g.fd != nil {
		_ = g.fd.Close()
		g.fd = nil
	}
	err := g.Kill()
	for _, d := range g.dirs {
		err = errors.Join(err, rmdir(d))
	}
	return err
}

// rmdir removes group directory d, waiting out the moment a killed group is still busy.
func rmdir(d string) error {
	deadline := time.Now().Add(killTimeout)
	for {
		err := syscall.Rmdir(d)
		switch {
		case err == nil || errors.Is(err, syscall.ENOENT):
			return nil
		case !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline):
			return fmt.Errorf("cgroup: remove %s: %w", d, err)
		}
		time.Sleep(pollInterval)
	}
}
