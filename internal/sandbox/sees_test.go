package sandbox_test

import (
	"path/filepath"
	"testing"

	"github.com/webordinary/webordinary/internal/sandbox"
)

// TestJailSees: a jail sees the toolchain (through merged-/usr symlinks too) and its own
// paths, not the rest of the host; no jail sees everything.
func TestJailSees(t *testing.T) {
	t.Parallel()
	s := required(t)
	ws, hidden := t.TempDir(), t.TempDir()
	j := s.Jail(sandbox.Spec{Writable: []string{ws}})
	for p, want := range map[string]bool{"/usr/bin/env": true, "/bin/sh": true, ws: true, filepath.Join(ws, "x.sh"): true,
		filepath.Join(hidden, "x.sh"): false, "/root/x.sh": false, ws + "-other/x.sh": false, "/dev/null": true} {
		if got := j.Sees(p); got != want {
			t.Errorf("Sees(%s) = %v, want %v", p, got, want)
		}
	}
	var none *sandbox.Jail
	if !none.Sees(filepath.Join(hidden, "x.sh")) {
		t.Error("no jail (unsandboxed) does not see everything")
	}
}

func TestHidden(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]bool{"/srv/edit.sh": true, "/home/op/x.py": true, "/usr/local/bin/x": false,
		"/opt/tools/x": false, "/dev/null": false, "/tmp/out.log": false} {
		if got := sandbox.Hidden(p); got != want {
			t.Errorf("Hidden(%s) = %v, want %v", p, got, want)
		}
	}
}
