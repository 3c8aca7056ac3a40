package sandbox

import "strings"

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
