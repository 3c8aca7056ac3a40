//go:build linux

package preview

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDeployOfAHugeSparseFileEndsWithItsContext: the build output is the job's; a terabyte
// sparse file costs it nothing and the deploy would read (and store) all of it. Once the
// deploy has the file open, cancelling the context ends the deploy.
func TestDeployOfAHugeSparseFileEndsWithItsContext(t *testing.T) {
	t.Parallel()
	e := setup(t, DirConfig{})
	src := t.TempDir()
	writeTree(t, src, map[string]string{"index.html": "<h1>hi</h1>"})
	huge := filepath.Join(src, "huge.bin")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 40); err != nil {
		t.Skipf("no sparse files here: %v", err)
	}
	f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := e.dir.Deploy(ctx, Site{Project: "p", Thread: "t"}, src)
		done <- err
	}()
	waitUntil(t, "the deploy opens huge.bin", func() bool { return openHere(huge) })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("deploy after cancel: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the deploy goes on reading the huge file after its context ended")
	}
	_ = filepath.WalkDir(e.root, func(p string, d os.DirEntry, err error) error {
		if fi, ierr := os.Lstat(p); err == nil && ierr == nil && fi.Size() > 1<<20 {
			t.Errorf("the deploy stored %s (%d bytes) after its context ended", p, fi.Size())
		}
		return nil
	})
}

// openHere reports whether this process has the file path open.
func openHere(path string) bool {
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasSuffix(target, path) {
			return true
		}
	}
	return false
}
