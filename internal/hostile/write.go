package hostile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// MkdirAll creates the directory name and its missing parents, one component at a time
// through the root. An existing component that is a symlink fails with ErrSymlink, one that
// is not a directory with ErrNotDir.
func (t *Tree) MkdirAll(name string, perm fs.FileMode) error {
	clean, err := local(name)
	if err != nil || clean == "." {
		return err
	}
	parts := strings.Split(clean, string(filepath.Separator))
	for i := range parts {
		if err := t.mkdir(filepath.Join(parts[:i+1]...), perm); err != nil {
			return err
		}
	}
	return nil
}

// mkdir makes sure the directory p exists and is not a symlink.
func (t *Tree) mkdir(p string, perm fs.FileMode) error {
	fi, err := t.root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		if err = t.root.Mkdir(p, perm); !errors.Is(err, fs.ErrExist) {
			return err
		}
		fi, err = t.root.Lstat(p) // made meanwhile: check what it is
	}
	if err != nil {
		return err
	}
	return wantDir(p, fi)
}

// WriteNew creates the new file name holding data. It fails with an error matching
// fs.ErrExist when anything (a symlink included) is already there; its parent directories
// must exist (see MkdirAll) and be no symlinks.
func (t *Tree) WriteNew(name string, data []byte, perm fs.FileMode) error {
	clean, err := t.check(name)
	if err != nil {
		return err
	}
	f, err := t.root.OpenFile(clean, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.ToSlash(clean), err)
	}
	return nil
}
