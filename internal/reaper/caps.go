package reaper

import (
	"errors"
	"fmt"
	"syscall"
)

// prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL) from linux/prctl.h.
const (
	prCapAmbient         = 47
	prCapAmbientClearAll = 4
)

// DropAmbientCaps clears the calling thread's ambient capabilities, so the programs it starts
// from then on get no capability. systemd gives serve CAP_NET_BIND_SERVICE as an ambient
// capability to bind port 25; a job has no use for it, and bubblewrap refuses to run with any
// capability it was not installed setuid for ("Unexpected capabilities but not setuid").
//
// Capabilities belong to a thread: the caller must hold it (runtime.LockOSThread) from here to
// the start of the program, and never give it back, since Go would run other goroutines there
// — including ones that start programs expecting the capability. A kernel without ambient
// capabilities (before Linux 4.3) has none to clear.
func DropAmbientCaps() error {
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClearAll, 0)
	if errno != 0 && !errors.Is(errno, syscall.EINVAL) {
		return fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %w", errno)
	}
	return nil
}
