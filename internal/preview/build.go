package preview

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
)

// builder assembles one version directory from a scanned source and the previous version.
type builder struct {
	src     source
	srcRoot *os.Root          // reads source files without leaving the tree
	prev    manifest          // the previous version's files
	prevDir string            // the previous version's directory; "" when there is none
	byHash  map[string]string // prev's paths by sha256
	dst     string            // the staging directory being filled
}

// placed is what happened to one file.
type placed struct {
	entry  entry
	linked bool // hard-linked from the previous version rather than written
}

// run fills b.dst and returns the new version's manifest and counts.
func (b *builder) run(ctx context.Context) (manifest, Deployment, error) {
	if err := b.mkdirs(); err != nil {
		return manifest{}, Deployment{}, err
	}
	results := make([]placed, len(b.src.files))
	err := forEach(ctx, len(results), func(i int) (err error) {
		results[i], err = b.place(b.src.files[i])
		return err
	})
	if err != nil {
		return manifest{}, Deployment{}, err
	}
	m, dep := b.tally(results)
	return m, dep, nil
}

// mkdirs creates every source directory, empty ones included, parents first.
func (b *builder) mkdirs() error {
	for _, d := range b.src.dirs {
		if err := os.Mkdir(b.dstPath(d), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// place puts one file into the new version: linked when the previous version has the same
// content (at any path), written otherwise.
func (b *builder) place(rel string) (placed, error) {
	sum, size, err := b.hashSource(rel)
	if err != nil {
		return placed{}, err
	}
	if old, ok := b.match(rel, sum); ok && b.link(old, rel, size) {
		return placed{entry: entry{SHA256: sum, Size: size}, linked: true}, nil
	}
	e, err := b.copy(rel)
	return placed{entry: e}, err
}

// match finds a previous file with content sum, preferring the same path.
func (b *builder) match(rel, sum string) (string, bool) {
	if e, ok := b.prev.Files[rel]; ok && e.SHA256 == sum {
		return rel, true
	}
	old, ok := b.byHash[sum]
	return old, ok
}

// link hard-links the previous version's file old to rel. It refuses (and the caller writes
// the file instead) when the old file is missing or its size disagrees with the manifest, so
// damage to one version is not carried into the next.
func (b *builder) link(old, rel string, size int64) bool {
	from := filepath.Join(b.prevDir, filepath.FromSlash(old))
	fi, err := os.Lstat(from)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != size {
		return false
	}
	return os.Link(from, b.dstPath(rel)) == nil
}

// hashSource returns the sha256 (hex) and size of source file rel.
func (b *builder) hashSource(rel string) (string, int64, error) {
	f, err := b.openSource(rel)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := copyBuffered(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("read %s: %w", rel, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// copy writes source file rel into the new version, hashing what it writes.
func (b *builder) copy(rel string) (entry, error) {
	in, err := b.openSource(rel)
	if err != nil {
		return entry{}, err
	}
	defer in.Close()
	out, err := os.OpenFile(b.dstPath(rel), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return entry{}, err
	}
	h := sha256.New()
	n, err := copyBuffered(io.MultiWriter(out, h), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return entry{}, fmt.Errorf("write %s: %w", rel, err)
	}
	return entry{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

// openSource opens source file rel through the source root and checks it is a regular file.
func (b *builder) openSource(rel string) (*os.File, error) {
	f, err := b.srcRoot.Open(filepath.FromSlash(rel))
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %v", ErrUnsafeSource, rel, err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s is no longer a regular file", ErrUnsafeSource, rel)
	}
	return f, nil
}

// tally builds the manifest and counts from the placed files.
func (b *builder) tally(results []placed) (manifest, Deployment) {
	m := manifest{Files: make(map[string]entry, len(results))}
	var dep Deployment
	for i, r := range results {
		m.Files[b.src.files[i]] = r.entry
		if r.linked {
			dep.Unchanged++
			continue
		}
		dep.Written++
		dep.Bytes += r.entry.Size
	}
	for p := range b.prev.Files {
		if _, ok := m.Files[p]; !ok {
			dep.Deleted++
		}
	}
	return m, dep
}

func (b *builder) dstPath(rel string) string { return filepath.Join(b.dst, filepath.FromSlash(rel)) }

// bufPool holds copy buffers; files are copied by many workers at once.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// copyBuffered copies r to w with a pooled buffer.
func copyBuffered(w io.Writer, r io.Reader) (int64, error) {
	buf := bufPool.Get().(*[]byte)
	defer bufPool.Put(buf)
	return io.CopyBuffer(onlyWriter{w}, onlyReader{r}, *buf)
}

// onlyReader and onlyWriter hide ReadFrom/WriteTo so io.CopyBuffer uses the pooled buffer.
type onlyReader struct{ io.Reader }
type onlyWriter struct{ io.Writer }

// forEach calls fn(i) for every i in [0, n) on a few goroutines and returns the first error.
// It returns ctx.Err() unwrapped if ctx ends first.
func forEach(ctx context.Context, n int, fn func(i int) error) error {
	inner, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for range min(n, 2*runtime.GOMAXPROCS(0), 16) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && inner.Err() == nil; i = int(next.Add(1) - 1) {
				if err := fn(i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return first
}
