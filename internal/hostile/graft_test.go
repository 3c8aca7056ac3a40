package hostile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// platformTree is a trusted directory to graft: a file, an executable in a subdirectory, a
// relative symlink and a FIFO (which is not taken).
func platformTree(t *testing.T) string {
	t.Helper()
	from := t.TempDir()
	if err := os.MkdirAll(filepath.Join(from, "pkg", "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]fs.FileMode{"pkg/index.js": 0o444, "pkg/bin/run": 0o555} {
		if err := os.WriteFile(filepath.Join(from, name), []byte(name), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../pkg/bin/run", filepath.Join(from, "run")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(from, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return from
}

// TestGraftLinksOrCopies: linked files share the platform's inodes, copied ones do not and
// are their owner's to write; symlinks keep their targets; a FIFO is not taken.
func TestGraftLinksOrCopies(t *testing.T) {
	t.Parallel()
	from := platformTree(t)
	for _, link := range []bool{true, false} {
		dir := t.TempDir()
		tree, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer tree.Close()
		n, err := tree.Graft("node_modules", from, link)
		if err != nil || n != 5 {
			t.Fatalf("link %v: graft made %d entries: %v", link, n, err)
		}
		got, _ := os.ReadFile(filepath.Join(dir, "node_modules", "pkg", "index.js"))
		src, _ := os.Stat(filepath.Join(from, "pkg", "index.js"))
		dst, _ := os.Stat(filepath.Join(dir, "node_modules", "pkg", "index.js"))
		if string(got) != "pkg/index.js" || os.SameFile(src, dst) != link {
			t.Fatalf("link %v: index.js %q, same inode %v", link, got, os.SameFile(src, dst))
		}
		if !link && dst.Mode().Perm()&0o200 == 0 {
			t.Fatalf("a copy is not its owner's to write: %v", dst.Mode())
		}
		if target, err := os.Readlink(filepath.Join(dir, "node_modules", "run")); err != nil || target != "../pkg/bin/run" {
			t.Fatalf("link %v: symlink %q %v", link, target, err)
		}
		if _, err := os.Lstat(filepath.Join(dir, "node_modules", "fifo")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("link %v: the FIFO was taken: %v", link, err)
		}
	}
}

// TestGraftWritesOnlyInsideTheTree: what the job left where the graft goes (a symlink named
// like it, a symlinked parent) is refused, and nothing is written where it points.
func TestGraftWritesOnlyInsideTheTree(t *testing.T) {
	t.Parallel()
	from, outside := platformTree(t), t.TempDir()
	dir := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	tree, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	if _, err := tree.Graft("node_modules", from, true); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("graft onto a symlink: %v", err)
	}
	if _, err := tree.Graft("sub/node_modules", from, true); !errors.Is(err, ErrSymlink) {
		t.Fatalf("graft beneath a symlink: %v", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("the graft wrote outside the tree: %v", entries)
	}
}
