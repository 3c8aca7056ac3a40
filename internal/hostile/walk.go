package hostile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
)

// DirsHolding lists the directories below the tree's top that hold an entry called name, of
// any type (a directory, a file, a link), outermost first, without going into them. It reads
// directory listings only: no symbolic link is followed and no entry called name is opened.
// skip (nil: none) prunes directories by their slash path; at most max entries are read (the
// rest of the tree goes unsearched), and ctx ends the walk.
func (t *Tree) DirsHolding(ctx context.Context, name string, skip func(dir string) bool, max int) ([]string, error) {
	var found []string
	queue := []string{"."}
	for len(queue) > 0 && max > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d := queue[0]
		queue = queue[1:]
		entries := t.readDir(d, &max)
		if d != "." && slices.ContainsFunc(entries, func(e fs.DirEntry) bool { return e.Name() == name }) {
			found = append(found, d)
			continue
		}
		for _, e := range entries {
			sub := path.Join(d, e.Name())
			if e.IsDir() && e.Name() != name && (skip == nil || !skip(sub)) {
				queue = append(queue, sub)
			}
		}
	}
	return found, nil
}

// readDir reads up to *budget entries of d (an unreadable directory has none), counting them
// against *budget.
func (t *Tree) readDir(d string, budget *int) []fs.DirEntry {
	f, err := t.root.Open(d)
	if err != nil {
		return nil
	}
	defer f.Close()
	var all []fs.DirEntry
	for *budget > 0 {
		entries, err := f.ReadDir(min(*budget, 1024))
		all = append(all, entries...)
		*budget -= len(entries)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return all
			}
			break
		}
	}
	return all
}

// RemoveAll removes name and what it holds (a link itself, never what it points to); a
// symlinked parent fails with ErrSymlink. A missing name is not an error.
func (t *Tree) RemoveAll(name string) error {
	p, err := t.check(name)
	if err != nil {
		return err
	}
	if err := t.root.RemoveAll(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}
