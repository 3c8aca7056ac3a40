package preview

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// srcFile is one file to publish: where to open it and its path in the site.
type srcFile struct {
	ctx  context.Context // the walk's: reads of the file stop when it ends
	dir  *os.Root        // the directory to open name in
	name string          // one path element; for a symlink, the OS path from the tree's root
	rel  string          // slash-separated path relative to the tree's root
}

// open opens the file and checks that it is (still) a regular file; it returns its size.
func (f srcFile) open() (*os.File, int64, error) {
	file, err := f.dir.OpenFile(f.name, readFlags, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: open %s: %v", ErrUnsafeSource, f.rel, err)
	}
	fi, err := file.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		file.Close()
		return nil, 0, fmt.Errorf("%w: %s is no longer a regular file", ErrUnsafeSource, f.rel)
	}
	return file, fi.Size(), nil
}

// ctxReader reads r until ctx ends: a source file is the job's, and may be huge (sparse).
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// walker visits the files of a tree in parallel, a directory per goroutine and at most
// cap(sem) at work at once. Each directory is opened as an os.Root from its parent's, so
// every open is one path element resolved beneath the tree: nothing can lead outside it,
// and a file costs one open rather than one per path element.
type walker struct {
	top   *os.Root
	g     *group
	sem   chan struct{}
	visit func(srcFile) error
}

// walkTree calls visit, concurrently, for every file of the tree at top; it stops at the
// first error. top stays open; the caller closes it.
func walkTree(ctx context.Context, top *os.Root, workers int, visit func(srcFile) error) error {
	w := &walker{top: top, g: newGroup(ctx), sem: make(chan struct{}, workers), visit: visit}
	ref := &dirRef{root: top}
	ref.refs.Store(2) // the walk's and the caller's, so the walk never closes top
	w.g.Go(func() error {
		if err := send(w.g.ctx, w.sem, struct{}{}); err != nil {
			return err
		}
		defer func() { <-w.sem }()
		return w.dir(ref, ".")
	})
	return w.g.Wait()
}

// spawn walks the subdirectory name of parent on a new goroutine, once a slot is free.
func (w *walker) spawn(parent *dirRef, name, rel string) {
	parent.acquire()
	w.g.Go(func() error {
		if err := send(w.g.ctx, w.sem, struct{}{}); err != nil {
			parent.release()
			return err
		}
		defer func() { <-w.sem }()
		root, err := parent.root.OpenRoot(name)
		parent.release()
		if err != nil {
			return fmt.Errorf("open %s: %w", rel, err)
		}
		return w.dir(newDirRef(root), rel)
	})
}

// dir visits the files of one directory and spawns its subdirectories; it releases d.
func (w *walker) dir(d *dirRef, rel string) error {
	defer d.release()
	entries, err := readDir(d.root)
	if err != nil {
		return fmt.Errorf("read %s: %w", rel, err)
	}
	for _, e := range entries {
		if err := w.entry(d, path.Join(rel, e.Name()), e); err != nil {
			return err
		}
	}
	return nil
}

// entry handles one directory entry at slash path rel.
func (w *walker) entry(d *dirRef, rel string, e fs.DirEntry) error {
	if err := w.g.ctx.Err(); err != nil {
		return err
	}
	kind, err := classify(w.top, rel, e)
	switch {
	case err != nil:
		return err
	case kind == kindDir:
		w.spawn(d, e.Name(), rel)
		return nil
	case kind == kindLink:
		return w.visit(srcFile{ctx: w.g.ctx, dir: w.top, name: filepath.FromSlash(rel), rel: rel})
	}
	return w.visit(srcFile{ctx: w.g.ctx, dir: d.root, name: e.Name(), rel: rel})
}

// readDir lists the directory root.
func readDir(root *os.Root) ([]fs.DirEntry, error) {
	f, err := root.OpenFile(".", readFlags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// dirRef is an open directory shared by its own walk and its subdirectories' opens; the
// last release closes it.
type dirRef struct {
	root *os.Root
	refs atomic.Int32
}

func newDirRef(root *os.Root) *dirRef {
	d := &dirRef{root: root}
	d.refs.Store(1)
	return d
}

func (d *dirRef) acquire() { d.refs.Add(1) }

func (d *dirRef) release() {
	if d.refs.Add(-1) == 0 {
		d.root.Close()
	}
}

// send delivers v on ch unless ctx ends first.
func send[T any](ctx context.Context, ch chan<- T, v T) error {
	select {
	case ch <- v:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// group runs goroutines and keeps the first error, cancelling the others' ctx when one fails.
type group struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
	err    error
}

func newGroup(ctx context.Context) *group {
	ctx, cancel := context.WithCancel(ctx)
	return &group{ctx: ctx, cancel: cancel}
}

// Go runs fn on a new goroutine.
func (g *group) Go(fn func() error) {
	g.wg.Go(func() {
		if err := fn(); err != nil {
			g.once.Do(func() { g.err = err; g.cancel() })
		}
	})
}

// Wait waits for every goroutine and returns the first error.
func (g *group) Wait() error {
	g.wg.Wait()
	g.cancel()
	return g.err
}
