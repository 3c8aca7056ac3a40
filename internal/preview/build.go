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
)

// builder stores the files of a source tree in a thread's blob store and returns the
// manifest of the new version. A blob is named by the sha256 of its content and never
// changed once renamed into place, so a file already stored costs a hash and a stat.
type builder struct {
	blobs string // the thread's blob store
	donor string // another thread's blob store to hard-link from; "" for none

	mu   sync.Mutex
	done []placed
}

// placed is what happened to one file.
type placed struct {
	rel   string
	entry entry
	kept  bool // its blob was already stored (or linked in); nothing was written
}

// run stores every file of the tree at root; it returns the manifest and counts (Deleted
// aside). On error, blobs already stored stay until the thread's next prune.
func (b *builder) run(ctx context.Context, root string) (manifest, Deployment, error) {
	if err := os.MkdirAll(b.blobs, 0o755); err != nil {
		return manifest{}, Deployment{}, err
	}
	top, err := os.OpenRoot(root)
	if err != nil {
		return manifest{}, Deployment{}, err
	}
	defer top.Close()
	if err := walkTree(ctx, top, min(2*runtime.GOMAXPROCS(0), 16), b.place); err != nil {
		return manifest{}, Deployment{}, err
	}
	m, dep := b.tally()
	return m, dep, nil
}

// place hashes one source file and stores its content unless a blob already holds it.
func (b *builder) place(f srcFile) error {
	e, err := hashSource(f)
	if err != nil {
		return err
	}
	kept := hasBlob(b.blobs, e) || b.linkFromDonor(e)
	if !kept {
		if e, err = b.store(f); err != nil {
			return err
		}
	}
	b.mu.Lock()
	b.done = append(b.done, placed{rel: f.rel, entry: e, kept: kept})
	b.mu.Unlock()
	return nil
}

// hasBlob reports whether dir holds the blob of e with the right size. A wrong size (say, a
// blob truncated by a crash) counts as missing, so the deploy writes it again.
func hasBlob(dir string, e entry) bool {
	fi, err := os.Lstat(filepath.Join(dir, e.SHA256))
	return err == nil && fi.Mode().IsRegular() && fi.Size() == e.Size
}

// linkFromDonor hard-links the blob of e from the donor store, if it has it.
func (b *builder) linkFromDonor(e entry) bool {
	if b.donor == "" || !hasBlob(b.donor, e) {
		return false
	}
	err := os.Link(filepath.Join(b.donor, e.SHA256), filepath.Join(b.blobs, e.SHA256))
	return err == nil || errors.Is(err, fs.ErrExist)
}

// hashSource returns the sha256 and size of a source file, reading it once.
func hashSource(f srcFile) (entry, error) {
	file, size, err := f.open()
	if err != nil {
		return entry{}, err
	}
	defer file.Close()
	h := sha256.New()
	n, err := copyBuffered(h, io.LimitReader(ctxReader{f.ctx, file}, size)) // no extra read to find EOF
	if err != nil {
		return entry{}, fmt.Errorf("read %s: %w", f.rel, err)
	}
	return entry{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

// store copies a source file into a new blob, named by the hash of what was copied.
func (b *builder) store(f srcFile) (entry, error) {
	in, _, err := f.open()
	if err != nil {
		return entry{}, err
	}
	defer in.Close()
	tmp := tmpName(filepath.Join(b.blobs, "new"))
	e, err := writeHashed(tmp, ctxReader{f.ctx, in})
	if err == nil {
		err = os.Rename(tmp, filepath.Join(b.blobs, e.SHA256))
	}
	if err != nil {
		os.Remove(tmp)
		return entry{}, fmt.Errorf("store %s: %w", f.rel, err)
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

// tally builds the manifest and counts from the placed files.
func (b *builder) tally() (manifest, Deployment) {
	m := manifest{Files: make(map[string]entry, len(b.done))}
	var dep Deployment
	for _, p := range b.done {
		m.Files[p.rel] = p.entry
		if p.kept {
			dep.Unchanged++
			continue
		}
		dep.Written++
		dep.Bytes += p.entry.Size
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
