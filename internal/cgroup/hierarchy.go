package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// ErrUnavailable means no hierarchy lets the platform create groups with the memory and pids
// controllers; jobs then have rlimits only.
var ErrUnavailable = errors.New("cgroups unavailable")

// Parent is the name of the group every job group lives under.
const Parent = "webordinary"

// Hierarchy is where job groups are made, safe for concurrent use.
type Hierarchy struct {
	version int
	// parent is, per controller, the directory job groups are made in; on v2 one entry, "".
	parent map[string]string
	cpu    bool // CPU time is counted (v2 always; v1 with cpuacct)
	seq    atomic.Uint64
}

// v1Controllers are the cgroup v1 controllers a job group needs; v1Optional are used where
// mounted: cpuacct counts CPU time. Not cpu: on v1 a group's share is weighed against each
// process beside it (the platform often sits in the root group with every other program), so
// all jobs together would get as much CPU as one busy process of anyone's.
var (
	v1Controllers = []string{"memory", "pids"}
	v1Optional    = []string{"cpuacct"}
)

// open is Open's result, found once per process: a v2 probe moves the platform into a leaf.
var open = sync.OnceValues(func() (*Hierarchy, error) {
	mounts, err := readMounts("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	own, err := readOwn("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	h2, err2 := openV2(mounts, own, []string{"memory", "pids"})
	if err2 == nil {
		return h2, nil
	}
	h1, err1 := openV1(mounts, own)
	if err1 == nil {
		return h1, nil
	}
	return nil, fmt.Errorf("%w: v2: %v; v1: %v", ErrUnavailable, err2, err1)
})

// Open returns the hierarchy job groups are made in, or an error wrapping ErrUnavailable
// that says why there is none. The first call probes (and on v2 may move the platform's own
// processes into a leaf group); later calls return the same result.
func Open() (*Hierarchy, error) { return open() }

// Version is 1 or 2.
func (h *Hierarchy) Version() int { return h.version }

// String names the hierarchy for status lines: "cgroup v2" or "cgroup v1".
func (h *Hierarchy) String() string { return "cgroup v" + strconv.Itoa(h.version) }

// Dir is where job groups are made (v1: the memory controller's).
func (h *Hierarchy) Dir() string {
	if h.version == 2 {
		return h.parent[""]
	}
	return h.parent["memory"]
}

// mount is one cgroup filesystem: where it is mounted, which part of the hierarchy it shows,
// and its controllers (v1; nil for v2).
type mount struct {
	dir, root   string
	v2          bool
	controllers []string
}

// readMounts lists the cgroup mounts in a mountinfo file.
func readMounts(path string) ([]mount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := parseMount(sc.Text()); ok {
			out = append(out, m)
		}
	}
	return out, sc.Err()
}

// parseMount reads a mountinfo line: "id parent maj:min root dir opts [optional...] - fstype
// source superopts".
func parseMount(line string) (mount, bool) {
	pre, post, ok := strings.Cut(line, " - ")
	fields, tail := strings.Fields(pre), strings.Fields(post)
	if !ok || len(fields) < 5 || len(tail) < 3 {
		return mount{}, false
	}
	m := mount{root: unescape(fields[3]), dir: unescape(fields[4])}
	switch tail[0] {
	case "cgroup2":
		m.v2 = true
	case "cgroup":
		for _, o := range strings.Split(tail[2], ",") {
			if o != "rw" && o != "ro" && !strings.Contains(o, "=") {
				m.controllers = append(m.controllers, o)
			}
		}
	default:
		return mount{}, false
	}
	return m, true
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// readOwn maps each controller (v2: "") to the platform's own group path, from
// /proc/self/cgroup ("hierarchy-id:controllers:path").
func readOwn(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	own := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			own[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			own[c] = parts[2]
		}
	}
	return own, nil
}

// hostDir is the directory of group path p in m: the mount shows the hierarchy from m.root.
func (m mount) hostDir(p string) (string, error) {
	rel, err := filepath.Rel(m.root, p)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("own group %s is outside the mount of %s (%s)", p, m.root, m.dir)
	}
	return filepath.Join(m.dir, rel), nil
}

// openV1 makes the parent group under the platform's own group in each v1 controller.
func openV1(mounts []mount, own map[string]string) (*Hierarchy, error) {
	h := &Hierarchy{version: 1, parent: map[string]string{}}
	for _, c := range append(v1Controllers, v1Optional...) {
		m, ok := findV1(mounts, c)
		if !ok {
			if contains(v1Optional, c) {
				continue
			}
			return nil, fmt.Errorf("no %s controller mounted", c)
		}
		dir, err := m.hostDir(own[c])
		if err != nil {
			return nil, err
		}
		parent := filepath.Join(dir, Parent)
		if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			if contains(v1Optional, c) {
				continue
			}
			return nil, fmt.Errorf("make %s: %w", parent, err)
		}
		h.parent[c] = parent
	}
	h.cpu = h.parent["cpuacct"] != ""
	if err := h.try(); err != nil {
		return nil, err
	}
	return h, nil
}

func findV1(mounts []mount, controller string) (mount, bool) {
	for _, m := range mounts {
		for _, c := range m.controllers {
			if c == controller {
				return m, true
			}
		}
	}
	return mount{}, false
}

// openV2 finds the unified hierarchy's group the platform runs in and makes the parent of job
// groups with the needed controllers: at the root, a child "webordinary"; elsewhere (systemd
// delegation), the platform's own group, after moving its processes to a leaf.
func openV2(mounts []mount, own map[string]string, need []string) (*Hierarchy, error) {
	var m mount
	for _, c := range mounts {
		if c.v2 {
			m = c
		}
	}
	p, ok := own[""]
	if m.dir == "" || !ok {
		return nil, errors.New("no unified hierarchy mounted")
	}
	dir, err := m.hostDir(p)
	if err != nil {
		return nil, err
	}
	parent, err := v2Parent(dir, need)
	if err != nil {
		return nil, err
	}
	h := &Hierarchy{version: 2, parent: map[string]string{"": parent}, cpu: true}
	if err := h.try(); err != nil {
		return nil, err
	}
	return h, nil
}

// v2Parent makes the parent of job groups in the platform's own group dir, the controllers
// in need enabled for its children. No internal processes: a group other than the root whose
// children have controllers holds no process itself, so where enabling them is refused
// (EBUSY: a delegated subtree, or a container's root in a cgroup namespace) the group's
// processes move to a leaf "platform" first — only where the group is the platform's (see
// ours): a group it shares with other programs is not its to rearrange.
func v2Parent(dir string, need []string) (string, error) {
	if err := hasControllers(dir, need); err != nil {
		return "", err
	}
	err := enable(dir, need)
	if errors.Is(err, syscall.EBUSY) {
		if !ours(dir) {
			return "", fmt.Errorf("%s holds other processes and is not delegated to the platform: run it as a systemd service with Delegate=yes", dir)
		}
		if err := moveAll(dir, filepath.Join(dir, "platform")); err != nil {
			return "", err
		}
		err = enable(dir, need)
	}
	if err != nil {
		return "", err
	}
	parent := filepath.Join(dir, Parent)
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("make %s: %w", parent, err)
	}
	if err := enable(parent, need); err != nil {
		return "", err
	}
	return parent, nil
}

// hasControllers checks that dir's group may give its children the controllers in need.
func hasControllers(dir string, need []string) error {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return err
	}
	have := strings.Fields(string(data))
	for _, c := range need {
		if !contains(have, c) {
			return fmt.Errorf("controller %s not available in %s (have %q): delegate it (systemd: Delegate=memory pids cpu)", c, dir, have)
		}
	}
	return nil
}

// enable enables the controllers in need (and cpu where available) for dir's children.
func enable(dir string, need []string) error {
	data, _ := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	var add []string
	for _, c := range append(need, "cpu") {
		if contains(strings.Fields(string(data)), c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	return write(dir, "cgroup.subtree_control", strings.Join(add, " "))
}

// ours reports whether the platform may rearrange group dir: systemd delegated it (the
// trusted.delegate or user.delegate attribute), or it holds the platform's process alone.
func ours(dir string) bool {
	for _, attr := range []string{"trusted.delegate", "user.delegate"} {
		buf := make([]byte, 8)
		if n, err := syscall.Getxattr(dir, attr, buf); err == nil && string(buf[:n]) == "1" {
			return true
		}
	}
	pids, err := procs(dir)
	return err == nil && len(pids) == 1 && pids[0] == os.Getpid()
}

// moveAll moves every process of group dir into the leaf to (made if need be).
func moveAll(dir, to string) error {
	if err := os.Mkdir(to, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("make %s: %w", to, err)
	}
	pids, err := procs(dir)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		if err := write(to, "cgroup.procs", strconv.Itoa(pid)); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
	}
	return nil
}

// try makes and removes a group, so that Open fails rather than the first job; it also
// removes groups left by platforms that are gone.
func (h *Hierarchy) try() error {
	h.removeStale()
	g, err := h.New(Limits{})
	if err != nil {
		return err
	}
	return g.Remove()
}

// removeStale removes the groups of platform processes that no longer run (see stale). It
// removes empty groups only, and kills nothing: a group that still holds a process may be a
// live platform's this one cannot see (another pid namespace sharing the hierarchy).
func (h *Hierarchy) removeStale() {
	entries, err := os.ReadDir(h.Dir())
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !stale(e.Name()) {
			continue
		}
		for _, d := range h.group(e.Name()).dirs {
			_ = syscall.Rmdir(d) // EBUSY while a process is in it
		}
	}
}

// stale reports whether group name (job-<pid>-<start>-<seq>, see Hierarchy.name) is of a
// platform that no longer runs: no process pid started at start. A name of the older form
// job-<pid>-<seq> is stale unless a process pid other than this one runs.
func stale(name string) bool {
	var pid, start, seq int64
	if n, _ := fmt.Sscanf(name, "job-%d-%d-%d", &pid, &start, &seq); n == 3 {
		return startTime(pid) != start
	}
	if n, _ := fmt.Sscanf(name, "job-%d-%d", &pid, &seq); n == 2 {
		return pid == int64(os.Getpid()) || startTime(pid) < 0
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// write writes value to the control file name of group dir.
func write(dir, name, value string) error {
	if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0); err != nil {
		return fmt.Errorf("cgroup: write %q to %s: %w", value, name, err)
	}
	return nil
}

// procs lists the processes of group dir.
func procs(dir string) ([]int, error) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	var out []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out, nil
}
