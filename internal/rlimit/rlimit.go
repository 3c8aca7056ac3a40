// Package rlimit runs a command under resource limits (setrlimit) by way of a shim: the
// running binary, re-executed with the limits in an environment variable, sets them on itself
// and then replaces itself (execve) with the command, which inherits them. Go's os/exec has
// no way to set a child's limits, and setting them on the caller would limit the caller.
//
// The sandbox runs the shim as the first program inside a job's jail, after bubblewrap has
// made the job's user namespace: RLIMIT_NPROC then counts the processes of the job's uid in
// that namespace (Linux 5.14 and later count per user namespace), not every process of the
// shared job uid on the host.
//
// The shim is Linux-only. Main must be called first thing in main (reaper.Main does).
package rlimit

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// EnvVar carries the limits to the shim; the shim removes it before exec'ing the command.
const EnvVar = "WO_RLIMITS"

// limit is one resource limit: soft and hard values for a resource.
type limit struct {
	Resource   int // syscall.RLIMIT_* or rlimitNPROC
	Soft, Hard uint64
}

// RLIMIT_NPROC is missing from package syscall.
const rlimitNPROC = 6

// Limits are the limits the shim applies, 0 meaning "leave unchanged".
type Limits struct {
	// Data bounds each process's private writable memory (RLIMIT_DATA: heap, anonymous
	// mappings), not its reserved address space, which Node's V8 needs a lot of.
	Data uint64
	// Procs bounds the job user's processes and threads (RLIMIT_NPROC).
	Procs uint64
	// CPUSeconds bounds each process's CPU time (RLIMIT_CPU): SIGXCPU at the limit, SIGKILL a
	// second later.
	CPUSeconds uint64
	// FileSize bounds the size of a file a process writes (RLIMIT_FSIZE): SIGXFSZ beyond it.
	FileSize uint64
}

// list is l as setrlimit calls.
func (l Limits) list() []limit {
	var out []limit
	add := func(res int, soft, hard uint64) {
		if soft > 0 {
			out = append(out, limit{Resource: res, Soft: soft, Hard: hard})
		}
	}
	add(syscall.RLIMIT_CPU, l.CPUSeconds, l.CPUSeconds+1)
	add(syscall.RLIMIT_FSIZE, l.FileSize, l.FileSize)
	add(rlimitNPROC, l.Procs, l.Procs)
	add(syscall.RLIMIT_DATA, l.Data, l.Data) // last: the shim itself allocates little after it
	return out
}

// Encode is l as the value of EnvVar.
func (l Limits) Encode() string {
	return fmt.Sprintf("data=%d,procs=%d,cpu=%d,fsize=%d", l.Data, l.Procs, l.CPUSeconds, l.FileSize)
}

// Decode parses what Encode wrote.
func Decode(s string) (Limits, error) {
	var l Limits
	fields := map[string]*uint64{"data": &l.Data, "procs": &l.Procs, "cpu": &l.CPUSeconds, "fsize": &l.FileSize}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		p, ok := fields[k]
		if !ok {
			return l, fmt.Errorf("rlimit: unknown limit %q in %q", k, s)
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return l, fmt.Errorf("rlimit: limit %s: %w", k, err)
		}
		*p = n
	}
	return l, nil
}

// Env is the environment entry that makes the running binary, re-executed with the command's
// argument list after its own name, the shim.
func Env(l Limits) string { return EnvVar + "=" + l.Encode() }

// Main runs the shim when this process was started as one, and never returns then; otherwise
// it returns at once.
func Main() {
	v, ok := os.LookupEnv(EnvVar)
	if !ok {
		return
	}
	err := shim(v, os.Args[1:])
	fmt.Fprintf(os.Stderr, "webordinary: %v\n", err)
	os.Exit(126)
}

// shim sets the limits and execs argv; it returns only on failure.
func shim(v string, argv []string) error {
	if len(argv) == 0 {
		return errors.New("rlimit: no command to run")
	}
	l, err := Decode(v)
	if err != nil {
		return err
	}
	env := withoutVar(os.Environ())
	for _, lim := range l.list() {
		if err := setrlimit(lim); err != nil {
			return err
		}
	}
	// Without a per-job memory bound (cgroups), a job's processes together may still run the
	// host short; then the kernel's OOM killer should take the job, not the platform. Raising
	// one's own score needs no privilege; a kernel without the file just keeps the default.
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	if err := syscall.Exec(argv[0], argv, env); err != nil {
		return fmt.Errorf("run %s: %w", argv[0], err)
	}
	return nil
}

// setrlimit sets l, never above the current hard limit (only a privileged process may raise
// it).
func setrlimit(l limit) error {
	var cur syscall.Rlimit
	if err := syscall.Getrlimit(l.Resource, &cur); err != nil {
		return fmt.Errorf("rlimit: getrlimit(%d): %w", l.Resource, err)
	}
	r := syscall.Rlimit{Cur: min(l.Soft, cur.Max), Max: min(l.Hard, cur.Max)}
	if err := syscall.Setrlimit(l.Resource, &r); err != nil {
		return fmt.Errorf("rlimit: setrlimit(%d, %d): %w", l.Resource, l.Soft, err)
	}
	return nil
}

func withoutVar(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, EnvVar+"=") {
			out = append(out, kv)
		}
	}
	return out
}
