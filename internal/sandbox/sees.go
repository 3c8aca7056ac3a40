package sandbox

import (
	"path/filepath"
	"strings"
)

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
	if j.s.covered(p) {
		return true
	}
	for _, d := range append(append([]string{}, j.spec.Writable...), j.spec.ReadOnly...) {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// Toolchain reports whether the host path p (absolute, clean) lies under a toolchain root
// every sandboxed job sees (/usr, /bin, /opt…), whatever the workers' PATH and
// Config.ReadOnly.
func Toolchain(p string) bool { return underRoots(p) }

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
