package workspace_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/workspace"
)

// TestHasMarkersReadsNoPlantedFile: after a conflict turn the job may have replaced a
// conflicted file by a FIFO, a link to /dev/zero or a link to a root-only file holding
// markers. None is read (none hangs the check); a real file with markers is found.
func TestHasMarkersReadsNoPlantedFile(t *testing.T) {
	t.Parallel()
	dir, outside := t.TempDir(), t.TempDir()
	marked := "<<<<<<< ours\na\n=======\nb\n>>>>>>> theirs\n"
	write(t, filepath.Join(dir, "real.html"), marked)
	write(t, filepath.Join(outside, "secret"), marked)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o666); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"zero": "/dev/zero", "out": filepath.Join(outside, "secret")} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	ws := &workspace.Workspace{Dir: dir}
	done := make(chan []string, 1)
	go func() { done <- ws.HasMarkers(context.Background(), []string{"fifo", "zero", "out", "real.html"}) }()
	select {
	case left := <-done:
		if !slices.Equal(left, []string{"real.html"}) {
			t.Fatalf("files with markers: %v; want only real.html", left)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("HasMarkers hangs on a planted file")
	}
}
