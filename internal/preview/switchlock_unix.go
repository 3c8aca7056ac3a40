//go:build unix

package preview

import (
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock on the file at path (created if missing), waiting for
// another process's; held until unlock or the process ends. Holders keep it only for a few
// file operations.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil // closing the file drops the lock
}
