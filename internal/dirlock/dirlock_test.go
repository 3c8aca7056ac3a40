package dirlock_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/webordinary/webordinary/internal/dirlock"
)

// TestASecondHolderIsToldTheFirst: a held directory refuses another lock (here another open
// of the file in this process, as flock sees another process), naming the holder's pid; once
// released it can be taken again.
func TestASecondHolderIsToldTheFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := dirlock.Acquire(dir, "x.lock")
	if err != nil {
		t.Fatal(err)
	}
	_, err = dirlock.Acquire(dir, "x.lock")
	var held *dirlock.LockedError
	if !errors.As(err, &held) || !errors.Is(err, dirlock.ErrLocked) || held.PID != os.Getpid() || held.Path != filepath.Join(dir, "x.lock") {
		t.Fatalf("second acquire: %v (%+v), want the first's pid %d", err, held, os.Getpid())
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	again, err := dirlock.Acquire(dir, "x.lock")
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	_ = again.Release()
	_ = again.Release() // twice is fine
}
