//go:build !unix

package preview

import "errors"

func mkfifo(string) error { return errors.New("mkfifo is unix-only") }
