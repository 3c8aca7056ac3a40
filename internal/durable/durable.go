// Package durable writes files that survive a crash: complete or absent, never half written,
// and fsync'd before the caller says "accepted" (the SMTP spool, the reply outbox).
package durable

import (
	"os"
	"path/filepath"
	"strings"
)

// TempPrefix starts the names of files being written; RemoveTemps clears leftovers of a crash.
const TempPrefix = ".tmp-"

// Write writes data to dir/name through a temporary file that is fsync'd and renamed into
// place, so a reader or a crash sees the old file or the complete new one. The rename itself
// is durable only after SyncDir(dir); WriteFile does both.
func Write(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, TempPrefix+"*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // no-op after the rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), filepath.Join(dir, name))
}

// WriteFile is Write followed by SyncDir.
func WriteFile(dir, name string, data []byte) error {
	if err := Write(dir, name, data); err != nil {
		return err
	}
	return SyncDir(dir)
}

// Remove removes dir/name durably; a missing file is not an error.
func Remove(dir, name string) error {
	if err := os.Remove(filepath.Join(dir, name)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return SyncDir(dir)
}

// SyncDir fsyncs a directory, making renames and removals in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// RemoveTemps deletes the temporary files a crash left in dir.
func RemoveTemps(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), TempPrefix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}
