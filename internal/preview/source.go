package preview

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"unicode/utf8"
)

// source is a scanned build output: what a version must contain. Paths are slash-separated
// and relative to root; files are read through an os.Root on root, so a file swapped for an
// escaping symlink after the scan still cannot be read.
type source struct {
	root  string   // the tree's real path (symlinks resolved)
	dirs  []string // parents before children, without "."
	files []string // regular files, and symlinks to regular files inside the tree
}

// scanSource walks dir and lists what to publish. Symlinks to regular files inside the tree
// are published as copies of their target; anything else unusual fails with ErrUnsafeSource.
func scanSource(ctx context.Context, dir string) (source, error) {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return source{}, fmt.Errorf("read source %s: %w", dir, err)
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return source{}, fmt.Errorf("read source %s: not a directory; pass the build output directory", dir)
	}
	src := source{root: root}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return src.add(path, d)
	})
	if err != nil && ctx.Err() != nil {
		return source{}, ctx.Err()
	}
	if err != nil {
		return source{}, fmt.Errorf("scan source %s: %w", dir, err)
	}
	return src, nil
}

// add records one walked entry.
func (s *source) add(path string, d fs.DirEntry) error {
	rel, err := filepath.Rel(s.root, path)
	if err != nil {
		return err
	}
	if !utf8.ValidString(rel) {
		return fmt.Errorf("%w: %q: file name is not valid UTF-8; rename it", ErrUnsafeSource, rel)
	}
	rel = filepath.ToSlash(rel)
	switch t := d.Type(); {
	case t.IsDir():
		if rel != "." {
			s.dirs = append(s.dirs, rel)
		}
	case t.IsRegular():
		s.files = append(s.files, rel)
	case t&fs.ModeSymlink != 0:
		return s.addLink(path, rel)
	default:
		return fmt.Errorf("%w: %s is a %v, not a regular file; remove it from the build output", ErrUnsafeSource, rel, t)
	}
	return nil
}

// addLink records a symlink that resolves to a regular file inside root.
func (s *source) addLink(path, rel string) error {
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("%w: symlink %s does not resolve: %v", ErrUnsafeSource, rel, err)
	}
	if in, err := filepath.Rel(s.root, target); err != nil || !filepath.IsLocal(in) {
		return fmt.Errorf("%w: symlink %s points outside the source tree (to %s); copy the file in instead", ErrUnsafeSource, rel, target)
	}
	fi, err := os.Stat(target)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: symlink %s points at a directory or special file; copy it in instead", ErrUnsafeSource, rel)
	}
	s.files = append(s.files, rel)
	return nil
}
