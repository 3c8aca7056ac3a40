package hostile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// readFlags never follow a final symlink and never wait for a FIFO's writer.
const readFlags = os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// Open opens the regular file name for reading. It refuses a symlink anywhere on the way
// (ErrSymlink), anything but a regular file (ErrNotRegular, checked on the open descriptor)
// and a file of more than max bytes (ErrTooLarge). It never blocks on a FIFO. The caller
// closes the file; reads through ReadFile, Hash or Copy stay bounded if the file grows.
func (t *Tree) Open(name string, max int64) (*os.File, fs.FileInfo, error) {
	clean, err := t.check(name)
	if err != nil {
		return nil, nil, err
	}
	checked, err := t.root.Lstat(clean)
	if err != nil {
		return nil, nil, err
	}
	if err := wantRegular(clean, checked, max); err != nil {
		return nil, nil, err // no open at all of a device or FIFO
	}
	f, err := t.root.OpenFile(clean, readFlags, 0)
	if err != nil {
		return nil, nil, refused(clean, err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = sameRegular(clean, checked, fi, max)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// sameRegular checks the open file: still a regular file within max, and the very file the
// Lstat saw. (os.Root resolves a symlink inside the tree even under O_NOFOLLOW, so a name
// swapped for a link after the Lstat would otherwise open the link's target.)
func sameRegular(name string, checked, opened fs.FileInfo, max int64) error {
	if err := wantRegular(name, opened, max); err != nil {
		return err
	}
	if !os.SameFile(checked, opened) {
		return fmt.Errorf("%s changed while the platform read it: %w", filepath.ToSlash(name), ErrNotRegular)
	}
	return nil
}

// refused maps the ELOOP of an O_NOFOLLOW open of a symlink onto ErrSymlink.
func refused(name string, err error) error {
	if errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("%s %w", filepath.ToSlash(name), ErrSymlink)
	}
	return err
}

func wantRegular(name string, fi fs.FileInfo, max int64) error {
	p := filepath.ToSlash(name)
	switch m := fi.Mode(); {
	case m&fs.ModeSymlink != 0:
		return fmt.Errorf("%s %w", p, ErrSymlink)
	case !m.IsRegular():
		return fmt.Errorf("%s %w (it is a %s)", p, ErrNotRegular, kind(m))
	case fi.Size() > max:
		return tooLarge(p, max)
	}
	return nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

func tooLarge(p string, max int64) error {
	return fmt.Errorf("%s %w (over %s)", p, ErrTooLarge, size(max))
}

func size(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// ReadFile returns the content of the regular file name, at most max bytes (see Open).
func (t *Tree) ReadFile(ctx context.Context, name string, max int64) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := t.Copy(ctx, &buf, name, max); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Hash returns the hex sha256 of the regular file name, at most max bytes (see Open).
func (t *Tree) Hash(ctx context.Context, name string, max int64) (string, error) {
	h := sha256.New()
	if _, err := t.Copy(ctx, h, name, max); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Copy writes the content of the regular file name to w, at most max bytes (see Open), and
// returns how many it wrote. It returns ctx.Err() when ctx ends between two chunks.
func (t *Tree) Copy(ctx context.Context, w io.Writer, name string, max int64) (int64, error) {
	f, _, err := t.Open(name, max)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return copyBounded(ctx, w, f, filepath.ToSlash(filepath.Clean(name)), max)
}

// copyBounded copies r to w a chunk at a time, failing past max bytes or once ctx ends.
func copyBounded(ctx context.Context, w io.Writer, r io.Reader, name string, max int64) (int64, error) {
	size := int64(chunk)
	if max < size {
		size = max + 1 // enough to see one byte too many
	}
	buf := make([]byte, size)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		k, rerr := r.Read(buf)
		if n += int64(k); n > max {
			return n, tooLarge(name, max)
		}
		if _, err := w.Write(buf[:k]); err != nil {
			return n, err
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, fmt.Errorf("read %s: %w", name, rerr)
		}
	}
}
