package agentstate

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/webordinary/webordinary/internal/hostile"
)

// Limits of an archive.
const (
	// DefaultMaxBytes bounds a saved archive (compressed).
	DefaultMaxBytes = 32 << 20
	// MaxUnpacked bounds the files packed or unpacked (uncompressed).
	MaxUnpacked = 512 << 20
)

// ErrTooLarge: the state is over a limit; it stays on this machine.
var ErrTooLarge = errors.New("agent state too large to travel")

// Travelling are the top-level directories of a tenant's state that travel.
var Travelling = []string{"agent", "home"}

// skipNames are entries that never travel, at any depth: caches that are rebuilt, and
// credentials (they belong to the machine, and a job could read them back elsewhere).
var skipNames = map[string]bool{
	"node_modules": true, ".npm": true, ".cache": true, ".pnpm-store": true, ".yarn": true, ".bun": true,
	".node-gyp": true, ".credentials.json": true, "auth.json": true, ".git-credentials": true,
	".netrc": true, ".ssh": true,
}

// Skipped reports whether the entry named rel (slash-separated, relative to the state root)
// stays on this machine.
func Skipped(rel string) bool {
	return skipNames[path.Base(rel)] || strings.HasPrefix(path.Base(rel), "git-askpass")
}

// Stats describe one archive.
type Stats struct {
	Files    int
	Unpacked int64 // bytes of files
	Bytes    int   // bytes of the archive
}

// Pack archives the travelling parts of root. Missing parts are empty. An archive that grows
// over maxBytes stops with ErrTooLarge (so memory stays bounded).
func Pack(root string, maxBytes int) ([]byte, Stats, error) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&capped{buf: &buf, max: maxBytes}, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	p := packer{root: root, tw: tw}
	defer p.close()
	for _, top := range Travelling {
		if err := p.walk(top); err != nil {
			return nil, p.stats, err
		}
	}
	if err := errors.Join(tw.Close(), zw.Close()); err != nil {
		return nil, p.stats, err
	}
	p.stats.Bytes = buf.Len()
	return buf.Bytes(), p.stats, nil
}

// capped is a buffer that refuses to grow over max bytes.
type capped struct {
	buf *bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if c.buf.Len()+len(p) > c.max {
		return 0, fmt.Errorf("%w: the archive is over %d MiB", ErrTooLarge, c.max>>20)
	}
	return c.buf.Write(p)
}

type packer struct {
	root  string
	tree  *hostile.Tree // opened at the first file
	tw    *tar.Writer
	stats Stats
}

func (p *packer) close() {
	if p.tree != nil {
		p.tree.Close()
	}
}

func (p *packer) walk(top string) error {
	err := filepath.WalkDir(filepath.Join(p.root, top), func(abs string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(p.root, abs)
		rel = filepath.ToSlash(rel)
		switch {
		case Skipped(rel) && d.IsDir():
			return filepath.SkipDir
		case Skipped(rel), !d.IsDir() && !d.Type().IsRegular():
			return nil
		}
		return p.add(rel, d)
	})
	return err
}

func (p *packer) add(rel string, d fs.DirEntry) error {
	if d.IsDir() {
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		return p.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: rel + "/", Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime()})
	}
	f, fi, err := p.open(rel)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, hostile.ErrSymlink) || errors.Is(err, hostile.ErrNotRegular) {
		return nil // gone or swapped for something else since the walk saw it
	}
	if err != nil {
		return err
	}
	defer f.Close()
	p.stats.Unpacked += fi.Size()
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: int64(fi.Mode().Perm()), Size: fi.Size(), ModTime: fi.ModTime()}
	if err := p.tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := io.CopyN(p.tw, f, fi.Size()); err != nil {
		return fmt.Errorf("pack %s: %w", rel, err)
	}
	p.stats.Files++
	return nil
}

// open opens the file rel of the state, which the job controls: through package hostile
// (no link followed, no FIFO waited for), within what is left of MaxUnpacked.
func (p *packer) open(rel string) (*os.File, fs.FileInfo, error) {
	if p.tree == nil {
		tree, err := hostile.Open(p.root)
		if err != nil {
			return nil, nil, err
		}
		p.tree = tree
	}
	f, fi, err := p.tree.Open(filepath.FromSlash(rel), MaxUnpacked-p.stats.Unpacked)
	if errors.Is(err, hostile.ErrTooLarge) {
		err = fmt.Errorf("%w: more than %d MiB of files", ErrTooLarge, MaxUnpacked>>20)
	}
	return f, fi, err
}

// Unpack writes an archive made by Pack into a new directory dst (created; its parent must
// exist). It accepts only directories and regular files under the travelling parts.
func Unpack(data []byte, dst string) (Stats, error) {
	st := Stats{Bytes: len(data)}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return st, fmt.Errorf("agent state archive: %w", err)
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		return st, err
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return st, nil
		}
		if err != nil {
			return st, fmt.Errorf("agent state archive: %w", err)
		}
		if err := unpackEntry(tr, hdr, dst, &st); err != nil {
			return st, err
		}
	}
}

func unpackEntry(tr *tar.Reader, hdr *tar.Header, dst string, st *Stats) error {
	rel := path.Clean(strings.TrimSuffix(hdr.Name, "/"))
	top, _, _ := strings.Cut(rel, "/")
	if !validTop(top) || rel != strings.TrimSuffix(hdr.Name, "/") || strings.Contains(rel, "..") {
		return fmt.Errorf("agent state archive: refusing entry %q", hdr.Name)
	}
	abs := filepath.Join(dst, filepath.FromSlash(rel))
	mode := fs.FileMode(hdr.Mode).Perm()
	switch hdr.Typeflag {
	case tar.TypeDir:
		return os.MkdirAll(abs, mode|0o700)
	case tar.TypeReg:
		st.Unpacked += hdr.Size
		if st.Unpacked > MaxUnpacked {
			return fmt.Errorf("%w: more than %d MiB of files", ErrTooLarge, MaxUnpacked>>20)
		}
		st.Files++
		return writeFile(abs, tr, hdr.Size, mode)
	}
	return fmt.Errorf("agent state archive: refusing %q (type %c)", hdr.Name, hdr.Typeflag)
}

func validTop(top string) bool {
	for _, t := range Travelling {
		if top == t {
			return true
		}
	}
	return false
}

func writeFile(abs string, r io.Reader, size int64, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(abs, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode|0o600)
	if err != nil {
		return err
	}
	_, err = io.CopyN(f, r, size)
	return errors.Join(err, f.Close())
}
