package reply

import (
	"regexp"
	"sync"
)

// lazyRE is a regular expression compiled on first use. webordinary's binary starts for every
// job process (the rlimit shim, the egress bridge, the reaper's supervisor), and compiling this
// package's expressions at init was most of that start-up; only mail handling needs them.
type lazyRE struct{ get func() *regexp.Regexp }

// lazy returns expr, compiled on first use (a bad expression panics then, as MustCompile).
func lazy(expr string) *lazyRE {
	return &lazyRE{get: sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })}
}

// MatchString is regexp.Regexp.MatchString.
func (l *lazyRE) MatchString(s string) bool { return l.get().MatchString(s) }

// ReplaceAllString is regexp.Regexp.ReplaceAllString.
func (l *lazyRE) ReplaceAllString(src, repl string) string {
	return l.get().ReplaceAllString(src, repl)
}
