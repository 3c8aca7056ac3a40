// Package dirlock keeps a directory to one process: an exclusive flock on a file in it, held
// until the process releases it or ends (the kernel drops the lock with the process, so a
// crash leaves nothing to clean up). The file holds the holder's pid, for the error a second
// process gets.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrLocked is returned (wrapped in a *LockedError) when another process holds the lock.
var ErrLocked = errors.New("dirlock: directory in use by another process")

// LockedError says which process holds a directory.
type LockedError struct {
	// Path is the lock file.
	Path string
	// PID is the holder's process id as it wrote it; 0 when unreadable.
	PID int
}

func (e *LockedError) Error() string {
	who := "another process"
	if e.PID != 0 {
		who = "process " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("%s holds %s", who, e.Path)
}

// Unwrap makes errors.Is(err, ErrLocked) hold.
func (e *LockedError) Unwrap() error { return ErrLocked }

// Lock is a held lock.
type Lock struct{ f *os.File }

// Acquire takes the lock on dir's file name (created 0600) without waiting; another holder
// is a *LockedError. The directory must exist.
func Acquire(dir, name string) (*Lock, error) {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("dirlock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &LockedError{Path: path, PID: readPID(f)}
		}
		return nil, fmt.Errorf("dirlock: lock %s: %w", path, err)
	}
	if err := writePID(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("dirlock: %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Release drops the lock; the file stays (removing it would race with a process opening it).
// Safe to call on a nil Lock and more than once.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

func readPID(f *os.File) int {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	return pid
}
