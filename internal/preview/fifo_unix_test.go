//go:build unix

package preview

import "syscall"

func mkfifo(path string) error { return syscall.Mkfifo(path, 0o644) }
