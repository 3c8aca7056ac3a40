package app

import (
	"errors"
	"fmt"

	"github.com/webordinary/webordinary/internal/dirlock"
)

// ServeLockFile is the file in the data directory that a serve holds (flock) for its life:
// one serve per data directory. Its mail spools, outbox, previews and (embedded) engine
// files have one writer; workers on the same machine share the directory (workspaces,
// engine credentials) and take no lock.
const ServeLockFile = "serve.lock"

// lockData takes the data directory for this serve until the lock is released (or the
// process ends).
func (a *App) lockData() (*dirlock.Lock, error) {
	lock, err := dirlock.Acquire(a.cfg.Data, ServeLockFile)
	var held *dirlock.LockedError
	if errors.As(err, &held) {
		return nil, &FieldError{Field: "Data", Value: a.cfg.Data, Err: fmt.Errorf(
			"another webordinary serve runs on this data directory (%w): stop it, or give this one another data directory", err)}
	}
	if err != nil {
		return nil, &FieldError{Field: "Data", Value: a.cfg.Data, Err: err}
	}
	return lock, nil
}
