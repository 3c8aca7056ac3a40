package outbox

import (
	"os"
	"path/filepath"
	"strings"
)

// tempPrefix starts the names of files being written; leftovers of a crash are removed on Open.
const tempPrefix = ".tmp-"

// writeFileAtomic writes data to dir/name so that a reader (or a crash) sees the old file or
// the complete new one: it writes a temporary file, fsyncs it, renames it and fsyncs dir.
func writeFileAtomic(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, tempPrefix+"*")
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
	if err := os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	return syncDir(dir)
}

// removeFile removes dir/name durably; a missing file is not an error.
func removeFile(dir, name string) error {
	if err := os.Remove(filepath.Join(dir, name)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory, making renames and removals in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// removeTemps deletes temporary files a crash left in dir.
func removeTemps(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}
