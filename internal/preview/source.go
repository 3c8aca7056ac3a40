package preview

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"unicode/utf8"
)

// The source is a build output directory. Its files are published by their slash-separated
// path relative to its root; directories are implied by the files in them (an empty
// directory serves nothing either way). A symlink to a regular file inside the tree is
// published as a copy of its target; anything else unusual fails with ErrUnsafeSource.

// sourceRoot returns the real path (symlinks resolved) of the directory dir.
func sourceRoot(dir string) (string, error) {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("read source %s: %w", dir, err)
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("read source %s: not a directory; pass the build output directory", dir)
	}
	return root, nil
}

// entryKind is what the walk does with a directory entry.
type entryKind int

const (
	kindFile entryKind = iota // a regular file
	kindLink                  // a symlink to a regular file inside the tree
	kindDir                   // a directory to descend into
)

// classify decides what to do with the entry at slash path rel of the tree top, or
// fails with ErrUnsafeSource for an entry it will not publish.
func classify(top *os.Root, rel string, e fs.DirEntry) (entryKind, error) {
	if !utf8.ValidString(rel) {
		return 0, fmt.Errorf("%w: %q: file name is not valid UTF-8; rename it", ErrUnsafeSource, rel)
	}
	switch t := e.Type(); {
	case t.IsDir():
		return kindDir, nil
	case t.IsRegular():
		return kindFile, nil
	case t&fs.ModeSymlink != 0:
		return kindLink, checkLink(top, rel)
	default:
		return 0, fmt.Errorf("%w: %s is a %v, not a regular file; remove it from the build output", ErrUnsafeSource, rel, t)
	}
}

// checkLink accepts a symlink that resolves, beneath top, to a regular file. The link is
// resolved through the os.Root, never by the OS path: a link out of the tree fails the same
// way whether or not its target exists, and the error does not name the target, so a job
// cannot use the deploy (run as root) to learn what exists where it cannot look.
func checkLink(top *os.Root, rel string) error {
	fi, err := top.Stat(filepath.FromSlash(rel))
	if err != nil {
		return fmt.Errorf("%w: symlink %s does not lead to a file inside the build output; copy the file in instead", ErrUnsafeSource, rel)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: symlink %s points at a directory or special file; copy it in instead", ErrUnsafeSource, rel)
	}
	return nil
}
