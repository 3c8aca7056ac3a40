package hostile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Errors a Tree's methods wrap, after the path they concern (within the tree). Their text
// is written for the site's owner: it says what to change in the site.
var (
	// ErrSymlink: a component of the name is a symbolic link, which the platform never follows.
	ErrSymlink = errors.New("is a symbolic link; the platform follows no links in a site, so replace it with the file or directory itself")
	// ErrNotRegular: the name is a FIFO, socket, device or directory where a file was expected.
	ErrNotRegular = errors.New("is not a regular file; replace it with a file")
	// ErrNotDir: a component that must be a directory is something else.
	ErrNotDir = errors.New("is not a directory; rename or remove it")
	// ErrTooLarge: the file holds more than the caller's limit.
	ErrTooLarge = errors.New("is too large for the platform to read")
	// ErrOutside: the name is absolute or climbs out of the tree with "..".
	ErrOutside = errors.New("is not a path inside the site")
)

// chunk is how much a read takes between two looks at its context.
const chunk = 64 << 10

// Tree is a directory whose content a job controls. Its methods are safe for concurrent use;
// Close it when done.
type Tree struct {
	root *os.Root
}

// Open opens the tree at dir. dir itself is the platform's path (say, the workspace): it is
// resolved as usual; only names within it are treated as hostile.
func Open(dir string) (*Tree, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open tree: %w", err)
	}
	return &Tree{root: root}, nil
}

// Close releases the tree's directory.
func (t *Tree) Close() error { return t.root.Close() }

// Dir is the tree's directory as passed to Open (for the operator's logs).
func (t *Tree) Dir() string { return t.root.Name() }

// local cleans name and refuses one that is not inside the tree.
func local(name string) (string, error) {
	clean := filepath.Clean(name)
	if !filepath.IsLocal(clean) {
		return "", fmt.Errorf("%s %w", filepath.ToSlash(name), ErrOutside)
	}
	return clean, nil
}

// parents checks that no directory on the way to name is a symlink or a non-directory. A
// missing one is not an error here: the open that follows reports it.
func (t *Tree) parents(name string) error {
	dir := filepath.Dir(name)
	if dir == "." {
		return nil
	}
	parts := strings.Split(dir, string(filepath.Separator))
	for i := range parts {
		p := filepath.Join(parts[:i+1]...)
		fi, err := t.root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := wantDir(p, fi); err != nil {
			return err
		}
	}
	return nil
}

func wantDir(p string, fi fs.FileInfo) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s %w", filepath.ToSlash(p), ErrSymlink)
	case !fi.IsDir():
		return fmt.Errorf("%s %w", filepath.ToSlash(p), ErrNotDir)
	}
	return nil
}

// Lstat describes name without following it; a symlinked parent fails with ErrSymlink.
func (t *Tree) Lstat(name string) (fs.FileInfo, error) {
	clean, err := t.check(name)
	if err != nil {
		return nil, err
	}
	return t.root.Lstat(clean)
}

// Readlink returns the target of the symlink name (which it does not follow).
func (t *Tree) Readlink(name string) (string, error) {
	clean, err := t.check(name)
	if err != nil {
		return "", err
	}
	return t.root.Readlink(clean)
}

// check cleans name and checks its parents.
func (t *Tree) check(name string) (string, error) {
	clean, err := local(name)
	if err != nil {
		return "", err
	}
	return clean, t.parents(clean)
}
