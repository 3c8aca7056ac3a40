package hostile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// Graft makes the new directory name a copy of the platform's directory from (a tree the
// platform owns and trusts, such as a prepared node_modules): directories are made anew,
// symlinks made anew with the same targets, and regular files hard-linked when link is set
// (sharing from's inodes: the caller must have made them unwritable by the job), else copied
// (writable by their owner), as they are when from is on another file system; nothing else
// is taken. It fails with an error matching fs.ErrExist when anything is at name already.
// Every entry is made beneath a directory descriptor the graft opened itself (O_NOFOLLOW, one
// component at a time), so nothing the job left in the tree can lead the platform's writes
// elsewhere. It returns the number of entries made.
func (t *Tree) Graft(name, from string, link bool) (int, error) {
	clean, err := t.check(name)
	if err != nil {
		return 0, err
	}
	if err := t.root.Mkdir(clean, 0o755); err != nil {
		return 0, err
	}
	top, err := t.root.OpenFile(clean, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return 0, err
	}
	g := &graft{link: link, slots: make(chan struct{}, runtime.GOMAXPROCS(0))}
	g.dir(top, from)
	g.wg.Wait()
	if g.err != nil {
		return g.n, fmt.Errorf("graft %s into %s: %w", from, name, g.err)
	}
	return g.n, nil
}

// graft is one Graft in progress: directories are copied concurrently, each by one goroutine
// at a time, with as many in flight as there are slots.
type graft struct {
	link  bool
	slots chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	n     int
	err   error
}

// dir fills the open directory out (closed when done) from the platform's directory from.
func (g *graft) dir(out *os.File, from string) {
	defer out.Close()
	entries, err := os.ReadDir(from)
	if err != nil {
		g.fail(err)
		return
	}
	fd := int(out.Fd())
	made := 0
	for _, e := range entries {
		src := filepath.Join(from, e.Name())
		switch t := e.Type(); {
		case t.IsDir():
			sub, err := g.mkdir(fd, e.Name())
			if err != nil {
				g.fail(err)
				return
			}
			g.spawn(sub, src)
		case t&os.ModeSymlink != 0:
			target, err := os.Readlink(src)
			if err == nil {
				err = unix.Symlinkat(target, fd, e.Name())
			}
			if err != nil {
				g.fail(err)
				return
			}
		case t.IsRegular():
			if err := g.file(fd, e.Name(), src); err != nil {
				g.fail(err)
				return
			}
		default:
			continue
		}
		made++
	}
	g.mu.Lock()
	g.n += made
	g.mu.Unlock()
}

// mkdir makes the directory name beneath fd and opens it, refusing anything but the
// directory just made.
func (g *graft) mkdir(fd int, name string) (*os.File, error) {
	if err := unix.Mkdirat(fd, name, 0o755); err != nil {
		return nil, &os.PathError{Op: "mkdir", Path: name, Err: err}
	}
	sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(sub), name), nil
}

// spawn fills sub from src on another goroutine when a slot is free, else on this one.
func (g *graft) spawn(sub *os.File, src string) {
	select {
	case g.slots <- struct{}{}:
		g.wg.Go(func() {
			defer func() { <-g.slots }()
			g.dir(sub, src)
		})
	default:
		g.dir(sub, src)
	}
}

// file links or copies the platform's regular file src to name beneath fd.
func (g *graft) file(fd int, name, src string) error {
	if g.link {
		err := unix.Linkat(unix.AT_FDCWD, src, fd, name, 0)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EXDEV) {
			return &os.PathError{Op: "link", Path: name, Err: err}
		}
		// another file system: copy
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	o, err := unix.Openat(fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(fi.Mode().Perm()|0o200))
	if err != nil {
		return &os.PathError{Op: "create", Path: name, Err: err}
	}
	out := os.NewFile(uintptr(o), name)
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

func (g *graft) fail(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err == nil {
		g.err = err
	}
}
