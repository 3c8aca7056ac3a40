package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/webordinary/webordinary/internal/rlimit"
)

// Limits bound one job process and what it starts. A zero field means "not set" (the
// sandbox's default applies); Unlimited lifts a limit.
type Limits struct {
	// Memory bounds each process's private memory (RLIMIT_DATA): heap and anonymous mappings.
	Memory int64
	// Procs bounds the processes and threads of the job (RLIMIT_NPROC, counted in the job's own
	// user namespace).
	Procs int64
	// CPU bounds each process's CPU time (RLIMIT_CPU); unset, the job's timeout bounds its
	// wall time.
	CPU time.Duration
	// Disk bounds the job's writable directories (the workspace and the process's state: the
	// agent's state and home, or the build's home), checked after
	// each process, and the size of any one file it writes (RLIMIT_FSIZE, enforced).
	Disk int64
	// Tmp is the size of each of the job's RAM-backed /tmp and /var/tmp (enforced: ENOSPC).
	Tmp int64
}

// Unlimited is the value of a lifted limit ("mem=off").
const Unlimited = -1

// DefaultLimits apply to every job unless the worker's or the project's limits say otherwise.
var DefaultLimits = Limits{Memory: 2 << 30, Procs: 256, Disk: 2 << 30, Tmp: 512 << 20}

// runSize is the size of the job's /run, which nothing of a job's needs much of.
const runSize = 16 << 20

// ErrLimit marks a job process stopped by, or over, one of its limits: retrying will not help.
var ErrLimit = errors.New("job over its resource limit")

// LimitError says which limit a job went over and how to raise it. The site's owner is told
// in plainer words (the mail outbox's limit problem).
type LimitError struct {
	Key   string // mem, procs, cpu or disk
	Value string // the limit in force, as in --job-limits
	What  string // what happened: "used more than 2 GiB of memory"
}

// Error tells the operator what happened and how to raise the limit.
func (e *LimitError) Error() string {
	return fmt.Sprintf("%s (limit %s=%s; raise it with `webordinary project update PROJECT --job-limits %s=...`, or for every job with sandbox.job_limits in serve's and the workers' config)",
		e.What, e.Key, e.Value, e.Key)
}

// Unwrap makes a LimitError an ErrLimit.
func (e *LimitError) Unwrap() error { return ErrLimit }

// limitKeys are the names in a limits string, in the order String writes them.
var limitKeys = []string{"mem", "procs", "cpu", "disk", "tmp"}

// ParseLimits parses "mem=2GiB,procs=256,cpu=10m,disk=2GiB,tmp=512MiB": any subset, sizes
// in bytes or with a unit (KiB, MiB, GiB, TiB; K, M, G, T are the same), cpu as a Go duration,
// "off" to lift a limit. An empty string sets nothing.
func ParseLimits(s string) (Limits, error) {
	var l Limits
	if strings.TrimSpace(s) == "" {
		return l, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return l, fmt.Errorf("job limits %q: %q is not name=value (e.g. mem=2GiB,procs=256,cpu=10m,disk=2GiB,tmp=512MiB)", s, kv)
		}
		if err := l.set(k, v); err != nil {
			return l, fmt.Errorf("job limits %q: %w", s, err)
		}
	}
	return l, nil
}

func (l *Limits) set(k, v string) error {
	var err error
	switch k {
	case "mem":
		l.Memory, err = parseSize(v, 16<<20)
	case "procs":
		l.Procs, err = parseCount(v, 8)
	case "cpu":
		l.CPU, err = parseCPU(v)
	case "disk":
		l.Disk, err = parseSize(v, 1<<20)
	case "tmp":
		l.Tmp, err = parseSize(v, 1<<20)
	default:
		return fmt.Errorf("unknown limit %q: use %s", k, strings.Join(limitKeys, ", "))
	}
	if err != nil {
		return fmt.Errorf("%s=%s: %w", k, v, err)
	}
	return nil
}

var units = []struct {
	suffix string
	shift  uint
}{{"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}, {"K", 10}, {"M", 20}, {"G", 30}, {"T", 40}, {"B", 0}}

func parseSize(v string, least int64) (int64, error) {
	if v == "off" {
		return Unlimited, nil
	}
	num, shift := v, uint(0)
	for _, u := range units {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			num, shift = n, u.shift
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n <= 0 || n > (1<<62)>>shift {
		return 0, errors.New("not a size: write e.g. 512MiB or 2GiB, or off")
	}
	if n <<= shift; n < least {
		return 0, fmt.Errorf("too small: at least %s", formatSize(least))
	}
	return n, nil
}

func parseCount(v string, least int64) (int64, error) {
	if v == "off" {
		return Unlimited, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil || n <= 0:
		return 0, errors.New("not a count: write e.g. 256, or off")
	case n < least:
		return 0, fmt.Errorf("too small: at least %d", least)
	}
	return n, nil
}

func parseCPU(v string) (time.Duration, error) {
	if v == "off" {
		return Unlimited, nil
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil || d <= 0:
		return 0, errors.New("not a duration: write e.g. 90s or 10m, or off")
	case d < time.Second:
		return 0, errors.New("too small: at least 1s")
	}
	return d, nil
}

// Over is l with every field it does not set taken from base.
func (l Limits) Over(base Limits) Limits {
	pick := func(a, b int64) int64 {
		if a != 0 {
			return a
		}
		return b
	}
	return Limits{Memory: pick(l.Memory, base.Memory), Procs: pick(l.Procs, base.Procs),
		CPU: time.Duration(pick(int64(l.CPU), int64(base.CPU))), Disk: pick(l.Disk, base.Disk), Tmp: pick(l.Tmp, base.Tmp)}
}

// String is l as ParseLimits reads it, naming only the limits set.
func (l Limits) String() string {
	var parts []string
	add := func(k string, n int64, format func(int64) string) {
		switch {
		case n == Unlimited:
			parts = append(parts, k+"=off")
		case n != 0:
			parts = append(parts, k+"="+format(n))
		}
	}
	add("mem", l.Memory, formatSize)
	add("procs", l.Procs, func(n int64) string { return strconv.FormatInt(n, 10) })
	add("cpu", int64(l.CPU), func(n int64) string { return time.Duration(n).String() })
	add("disk", l.Disk, formatSize)
	add("tmp", l.Tmp, formatSize)
	return strings.Join(parts, ",")
}

func formatSize(n int64) string {
	for _, u := range []struct {
		s     string
		shift uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// words is a size for people: "2 GiB".
func words(n int64) string {
	s := formatSize(n)
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	return s[:i] + " " + s[i:]
}

// LimitsMode is how limits are enforced where jobs run sandboxed: setrlimit in the job's user
// namespace, a sized tmpfs, and a disk check after each process (see Limits).
const LimitsMode = "rlimits"

// limitsStatus is Status.Limits.
func (s *Sandbox) limitsStatus() string {
	if s.selfPath() == "" {
		return "only tmp=" + formatSize(s.cfg.Limits.Tmp) + " (webordinary's binary is not visible to jobs, so no rlimits: install it under /usr)"
	}
	return LimitsMode + " " + s.cfg.Limits.String()
}

// limits are the job's limits: its Spec's over the sandbox's.
func (j *Jail) limits() Limits { return j.spec.Limits.Over(j.s.cfg.Limits) }

// tmpfsArgs are the job's RAM-backed scratch directories, of bounded size.
func (j *Jail) tmpfsArgs() []string {
	tmp := j.limits().Tmp
	var out []string
	for _, d := range []string{"/tmp", "/var/tmp"} {
		if tmp > 0 {
			out = append(out, "--size", strconv.FormatInt(tmp, 10))
		}
		out = append(out, "--tmpfs", d)
	}
	return append(out, "--size", strconv.Itoa(runSize), "--tmpfs", "/run")
}

// devArgs size /dev/shm (bwrap's /dev is an unsized tmpfs the job could fill with half the
// host's memory) like /tmp, and make the rest of /dev read-only: the device nodes still work,
// but no file can be made there.
func (j *Jail) devArgs() []string {
	var out []string
	if tmp := j.limits().Tmp; tmp > 0 {
		out = append(out, "--size", strconv.FormatInt(tmp, 10))
	}
	return append(out, "--tmpfs", "/dev/shm", "--remount-ro", "/dev")
}

// shimArgs is the program and arguments after bwrap's "--": prog under the rlimit shim (the
// running binary, bound in the jail by selfBinds) once bwrap has made the job's namespaces.
// env is the command's environment, with the shim's limits added.
func (j *Jail) shimArgs(prog string, env []string) (argv, newEnv []string) {
	self := j.s.selfPath()
	rl := j.rlimits()
	if self == "" || rl == (rlimit.Limits{}) {
		return []string{prog}, env
	}
	if env == nil {
		env = os.Environ()
	}
	return []string{self, prog}, append(env[:len(env):len(env)], rlimit.Env(rl))
}

// rlimits are the job's limits as setrlimit values.
func (j *Jail) rlimits() rlimit.Limits {
	l := j.limits()
	pos := func(n int64) uint64 { return uint64(max(n, 0)) }
	return rlimit.Limits{Data: pos(l.Memory), Procs: pos(l.Procs), CPUSeconds: pos(int64(l.CPU / time.Second)), FileSize: pos(l.Disk)}
}

// selfPath is the running binary's path, as bound in every jail (selfBinds).
func (s *Sandbox) selfPath() string {
	s.selfBinds()
	return s.selfExe
}

// Exit codes of a process killed by the signals its rlimits send (bwrap passes on 128+signal).
const (
	exitCPU   = 128 + int(syscall.SIGXCPU)
	exitFSize = 128 + int(syscall.SIGXFSZ)
)

// Explain returns a *LimitError when a job process that exited with code and printed output
// (its tail) went over one of its limits, nil otherwise. CPU time and file size are known from
// the signal; memory and processes, which make allocations and forks fail rather than kill,
// from what the job's tools print then.
func (j *Jail) Explain(code int, output string) error {
	if j == nil || code == 0 {
		return nil
	}
	l := j.limits()
	switch {
	case code == exitCPU && l.CPU > 0:
		return &LimitError{Key: "cpu", Value: l.CPU.String(), What: "a process of the job used more than " + l.CPU.String() + " of CPU time"}
	case code == exitFSize && l.Disk > 0:
		return &LimitError{Key: "disk", Value: formatSize(l.Disk), What: "the job wrote a file larger than " + words(l.Disk)}
	case l.Memory > 0 && containsAny(output, memoryMarks):
		return &LimitError{Key: "mem", Value: formatSize(l.Memory), What: "a process of the job ran out of memory: it tried to use more than " + words(l.Memory)}
	case l.Procs > 0 && containsAny(output, forkMarks):
		return &LimitError{Key: "procs", Value: strconv.FormatInt(l.Procs, 10), What: fmt.Sprintf("the job could not start more processes: it ran into its limit of %d processes and threads", l.Procs)}
	}
	return nil
}

// memoryMarks and forkMarks are what common runtimes print when an allocation or a fork fails.
var (
	memoryMarks = []string{"MemoryError", "Cannot allocate memory", "out of memory", "Out of memory",
		"heap out of memory", "std::bad_alloc", "memory exhausted", "ENOMEM"}
	forkMarks = []string{"fork: retry", "fork: Resource temporarily unavailable", "Cannot fork", "can't fork",
		"spawn EAGAIN", "fork failed", "pthread_create", "BlockingIOError: [Errno 11]"}
)

func containsAny(s string, marks []string) bool {
	for _, m := range marks {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// maxDiskEntries bounds the walk of CheckDisk: a job with more files than this is over its
// disk limit whatever their sizes.
const maxDiskEntries = 1 << 20

// OverLimit is the limit a finished process of the job went over, if any: what its exit
// says (Explain; only for a failed process) or the disk use it left (CheckDisk). Such a
// failure is not the process's to retry or repair.
func (j *Jail) OverLimit(ok bool, code int, output string) error {
	if !ok {
		if err := j.Explain(code, output); err != nil {
			return err
		}
	}
	return j.CheckDisk()
}

// CheckDisk returns a *LimitError when the job's writable directories hold more than its disk
// limit (each file at the larger of its blocks and its size, symlinks not followed, hard links
// counted each time). The job may
// exceed the limit while it runs: this check, after each process, is what fails it.
func (j *Jail) CheckDisk() error {
	if j == nil {
		return nil
	}
	limit := j.limits().Disk
	if limit <= 0 {
		return nil
	}
	used, entries, err := diskUsage(j.spec.Writable, limit)
	switch {
	case err != nil:
		return fmt.Errorf("sandbox: measure the job's disk use: %w", err)
	case entries > maxDiskEntries:
		return &LimitError{Key: "disk", Value: formatSize(limit), What: fmt.Sprintf("the job left more than %d files", maxDiskEntries)}
	case used > limit:
		return &LimitError{Key: "disk", Value: formatSize(limit), What: "the job's workspace, state and home use more than " + words(limit) + " of disk"}
	}
	return nil
}

// diskUsage adds up the blocks of every file under dirs, stopping once over limit or
// maxDiskEntries.
func diskUsage(dirs []string, limit int64) (used int64, entries int, err error) {
	errStop := errors.New("stop")
	for _, d := range dirs {
		err = filepath.WalkDir(d, func(_ string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil // vanished or unreadable: the job's own doing; count what is there
			}
			entries++
			if fi, err := e.Info(); err == nil {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok {
					// The larger of the blocks and the size: a sparse file takes no blocks
					// here, but every copy the platform makes of it (a deploy) takes its size.
					used += max(st.Blocks*512, fi.Size())
				}
			}
			if used > limit || entries > maxDiskEntries {
				return errStop
			}
			return nil
		})
		if errors.Is(err, errStop) {
			return used, entries, nil
		}
		if err != nil {
			return used, entries, err
		}
	}
	return used, entries, nil
}
