package preview

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
)

// builder stores the files of one source tree in a thread's blob store and returns the
// manifest of the new version. A blob is named by the sha256 of its content and never
// changed once renamed into place.
type builder struct {
	src     source
	srcRoot *os.Root // reads source files without leaving the tree
	blobs   string   // the thread's blob store
	donor   string   // another thread's blob store to hard-link from; "" for none
}

// placed is what happened to one file.
type placed struct {
	entry entry
	kept  bool // its blob was already stored (or linked in); nothing was written
}

// run stores every source file and returns the new manifest and counts (Deleted aside).
func (b *builder) run(ctx context.Context) (manifest, Deployment, error) {
	if err := os.MkdirAll(b.blobs, 0o755); err != nil {
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

// place hashes one source file and stores its content unless a blob already holds it.
func (b *builder) place(rel string) (placed, error) {
	sum, size, err := b.hashSource(rel)
	if err != nil {
		return placed{}, err
	}
	if hasBlob(b.blobs, sum, size) || b.linkFromDonor(sum, size) {
		return placed{entry: entry{SHA256: sum, Size: size}, kept: true}, nil
	}
	e, err := b.store(rel)
	return placed{entry: e}, err
}

// hasBlob reports whether dir holds blob sum with the expected size. A wrong size (say, a
// blob truncated by a crash) counts as missing, so the next deploy writes it again.
func hasBlob(dir, sum string, size int64) bool {
	fi, err := os.Lstat(filepath.Join(dir, sum))
	return err == nil && fi.Mode().IsRegular() && fi.Size() == size
}

// linkFromDonor hard-links blob sum from the donor store, if it has it.
func (b *builder) linkFromDonor(sum string, size int64) bool {
	if b.donor == "" || !hasBlob(b.donor, sum, size) {
		return false
	}
	err := os.Link(filepath.Join(b.donor, sum), filepath.Join(b.blobs, sum))
	return err == nil || errors.Is(err, fs.ErrExist)
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

// store copies source file rel into a new blob, named by the hash of what was copied.
func (b *builder) store(rel string) (entry, error) {
	in, err := b.openSource(rel)
	if err != nil {
		return entry{}, err
	}
	defer in.Close()
	tmp := tmpName(filepath.Join(b.blobs, "new"))
	e, err := writeHashed(tmp, in)
	if err == nil {
		err = os.Rename(tmp, filepath.Join(b.blobs, e.SHA256))
	}
	if err != nil {
		os.Remove(tmp)
		return entry{}, fmt.Errorf("store %s: %w", rel, err)
	}
	return e, nil
}

// writeHashed writes r to a new file at path and returns the hash and size written.
func writeHashed(path string, r io.Reader) (entry, error) {
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return entry{}, err
	}
	h := sha256.New()
	n, err := copyBuffered(io.MultiWriter(out, h), r)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return entry{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, err
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
		if r.kept {
			dep.Unchanged++
			continue
		}
		dep.Written++
		dep.Bytes += r.entry.Size
	}
	return m, dep
}

// bufPool holds copy buffers; files are copied by several workers at once.
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
