//go:build unix

package preview

import (
	"os"
	"syscall"
)

// readFlags opens source files non-blocking: a FIFO swapped in cannot stall the open, and
// os skips switching a regular file's descriptor to non-blocking and back (four syscalls).
const readFlags = os.O_RDONLY | syscall.O_NONBLOCK
