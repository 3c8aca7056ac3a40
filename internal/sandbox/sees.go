package sandbox

import (
	"path/filepath"
	"slices"
	"strings"
)

// jobOwn are the directories every jail has its own of: /dev and /proc (the same devices and
// a view of its own processes) and private, empty /tmp, /run and /var/tmp.
var jobOwn = []string{"/dev", "/proc", "/tmp", "/run", "/var/tmp"}

// Sees reports whether a process in j sees the host path p (absolute, clean) at the same path:
// p, or the path its symlinks resolve to, lies under the toolchain, PATH or Config.ReadOnly
// paths every job sees, or under one of the jail's own Writable and ReadOnly paths. A nil j
// (unsandboxed) sees everything. Safe for concurrent use.
func (j *Jail) Sees(p string) bool {
	if j == nil {
		return true
	}
	return j.sees(p) || (resolved(p) != "" && j.sees(resolved(p)))
}

func (j *Jail) sees(p string) bool {
	return j.s.covered(p) || under(p, "/dev", "/proc") || under(p, slices.Concat(j.spec.Writable, j.spec.ReadOnly)...)
}

// under reports whether p is one of dirs or lies below one.
func under(p string, dirs ...string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return p == d || strings.HasPrefix(p, d+"/") })
}

// Hidden reports whether the host path p (absolute, clean) may be hidden from sandboxed jobs:
// it is neither under a toolchain root every job sees (/usr, /bin, /opt…) nor in a directory
// every jail has its own of (/dev, /tmp…). Whether a job sees it then depends on the workers'
// PATH and Config.ReadOnly.
func Hidden(p string) bool { return !underRoots(p) && !under(p, jobOwn...) }

// CommandPaths are the words of a shell command that look like absolute paths: what a jail
// must see for the command to run.
func CommandPaths(command string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(command, func(c rune) bool { return strings.ContainsRune(" \t\n;&|()<>\"'`=", c) }) {
		if strings.HasPrefix(w, "/") && len(w) > 1 {
			out = append(out, filepath.Clean(w))
		}
	}
	return out
}
