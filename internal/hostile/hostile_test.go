package hostile_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/hostile"
)

// setup makes a tree with a regular file and a secret directory outside it that only root
// may read (the platform runs as root; the job does not).
func setup(t *testing.T) (*hostile.Tree, string, string) {
	t.Helper()
	base := t.TempDir()
	dir, secret := filepath.Join(base, "site"), filepath.Join(base, "root-only")
	for _, d := range []string{dir, secret} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(dir, "index.html"), "<h1>hi</h1>")
	mustWrite(t, filepath.Join(secret, "key"), "v20-secret")
	tree, err := hostile.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tree.Close() })
	return tree, dir, secret
}

func mustWrite(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mustLink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func TestReadsRefuseWhatTheJobPlanted(t *testing.T) {
	t.Parallel()
	tree, dir, secret := setup(t)
	mustLink(t, filepath.Join(secret, "key"), filepath.Join(dir, "out"))
	mustLink(t, "index.html", filepath.Join(dir, "in"))
	mustLink(t, "/dev/zero", filepath.Join(dir, "zz"))
	mustLink(t, secret, filepath.Join(dir, "sub"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, "big"), strings.Repeat("x", 101))
	for _, tc := range []struct {
		name string
		want error
	}{
		{"out", hostile.ErrSymlink},     // a link out of the tree
		{"in", hostile.ErrSymlink},      // no link is followed, even inside
		{"zz", hostile.ErrSymlink},      // a link to a device that never ends
		{"sub/key", hostile.ErrSymlink}, // a symlinked parent
		{"fifo", hostile.ErrNotRegular}, // must not block on open
		{"d", hostile.ErrNotRegular},    // a directory
		{"big", hostile.ErrTooLarge},    // over the limit
		{"../root-only/key", hostile.ErrOutside},
		{"/etc/passwd", hostile.ErrOutside},
		{"missing", fs.ErrNotExist},
	} {
		data, err := tree.ReadFile(context.Background(), tc.name, 100)
		if !errors.Is(err, tc.want) {
			t.Errorf("ReadFile(%s) = %q, %v; want %v", tc.name, data, err, tc.want)
		}
		if first, _, _ := strings.Cut(strings.TrimPrefix(tc.name, "/"), "/"); err != nil && !strings.Contains(err.Error(), first) {
			t.Errorf("ReadFile(%s): error %q does not name the path", tc.name, err)
		}
		if _, err := tree.Hash(context.Background(), tc.name, 100); !errors.Is(err, tc.want) {
			t.Errorf("Hash(%s): %v; want %v", tc.name, err, tc.want)
		}
	}
	if data, err := tree.ReadFile(context.Background(), "index.html", 100); err != nil || string(data) != "<h1>hi</h1>" {
		t.Fatalf("a regular file: %q %v", data, err)
	}
	if target, err := tree.Readlink("zz"); err != nil || target != "/dev/zero" {
		t.Fatalf("Readlink: %q %v", target, err)
	}
}

func TestASymlinkedSubdirectoryIsRefusedNamed(t *testing.T) {
	t.Parallel()
	tree, dir, secret := setup(t)
	if err := os.MkdirAll(filepath.Join(dir, "public"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustLink(t, secret, filepath.Join(dir, "public", "attachments"))
	_, err := tree.ReadFile(context.Background(), "public/attachments/key", 100)
	if !errors.Is(err, hostile.ErrSymlink) || !strings.HasPrefix(err.Error(), "public/attachments is a symbolic link") {
		t.Fatalf("read through a symlinked parent: %v", err)
	}
}

func TestWritesStayInTheTree(t *testing.T) {
	t.Parallel()
	tree, dir, secret := setup(t)
	if err := os.MkdirAll(filepath.Join(dir, "public"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustLink(t, secret, filepath.Join(dir, "public", "attachments"))
	mustLink(t, filepath.Join(secret, "planted"), filepath.Join(dir, "dangling"))
	mustWrite(t, filepath.Join(dir, "file"), "f")

	err := tree.MkdirAll("public/attachments", 0o755)
	if !errors.Is(err, hostile.ErrSymlink) || err.Error() != "public/attachments "+hostile.ErrSymlink.Error() {
		t.Fatalf("MkdirAll through a symlink: %v", err)
	}
	if err := tree.WriteNew("public/attachments/cron", []byte("* * * * * root sh"), 0o644); !errors.Is(err, hostile.ErrSymlink) {
		t.Fatalf("WriteNew through a symlinked parent: %v", err)
	}
	if err := tree.WriteNew("dangling", []byte("x"), 0o644); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("WriteNew over a dangling symlink: %v", err)
	}
	if err := tree.MkdirAll("file/sub", 0o755); !errors.Is(err, hostile.ErrNotDir) {
		t.Fatalf("MkdirAll through a file: %v", err)
	}
	if err := tree.WriteNew("../escape", []byte("x"), 0o644); !errors.Is(err, hostile.ErrOutside) {
		t.Fatalf("WriteNew outside: %v", err)
	}
	entries, _ := os.ReadDir(secret)
	if len(entries) != 1 {
		t.Fatalf("the platform wrote outside the tree: %v", entries)
	}
	if err := tree.MkdirAll("a/b/c", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := tree.WriteNew("a/b/c/new.txt", []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a/b/c/new.txt")); string(b) != "new" {
		t.Fatalf("written: %q", b)
	}
}

func TestAHugeReadEndsWithItsContext(t *testing.T) {
	t.Parallel()
	tree, dir, _ := setup(t)
	// A terabyte of zeros (sparse): without the context, the read would go on for hours.
	f, err := os.Create(filepath.Join(dir, "huge"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 40); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	w := &cancelAfter{n: 4 << 20, cancel: cancel}
	if _, err = tree.Copy(ctx, w, "huge", 1<<41); !errors.Is(err, context.Canceled) {
		t.Fatalf("copy after cancel: %v", err)
	}
	if _, err := tree.Hash(context.Background(), "huge", 1<<30); !errors.Is(err, hostile.ErrTooLarge) {
		t.Fatalf("hash over the limit: %v", err)
	}
}

// cancelAfter cancels once n bytes have been written to it.
type cancelAfter struct {
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	if c.n -= len(p); c.n <= 0 {
		c.cancel()
	}
	return len(p), nil
}

// TestASwapAfterTheCheckStaysInTheTree swaps checked files for symlinks (out of the tree and
// inside it) while reads run: every read returns the file's own content or an error.
func TestASwapAfterTheCheckStaysInTheTree(t *testing.T) {
	t.Parallel()
	tree, dir, secret := setup(t)
	mustWrite(t, filepath.Join(dir, "f"), "mine")
	mustLink(t, filepath.Join(secret, "key"), filepath.Join(dir, "evil"))
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, "d", "key"), "mine")
	mustLink(t, secret, filepath.Join(dir, "evil-d"))
	mustWrite(t, filepath.Join(dir, "other"), "other")
	mustLink(t, "other", filepath.Join(dir, "evil-in"))
	done, stop := make(chan struct{}), make(chan struct{})
	defer func() { close(stop); <-done }() // the swaps end before the tree is removed
	// The job: swap names back and forth with links.
	go func() {
		defer close(done)
		for i := 0; i < 2000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			swap(dir, "f", "evil")
			swap(dir, "d", "evil-d")
			swap(dir, "f", "evil-in")
		}
	}()
	deadline := time.After(time.Minute)
	for {
		select {
		case <-done:
			return
		case <-deadline:
			t.Fatal("the swapping job did not finish")
		default:
		}
		for _, name := range []string{"f", "evil", "evil-in", "d/key", "evil-d/key"} {
			// Whatever the name holds now, a read returns "mine" (the file the Lstat saw) or
			// fails: never the secret out of the tree, never "other" through a link inside it.
			if data, err := tree.ReadFile(context.Background(), name, 100); err == nil && string(data) != "mine" {
				t.Fatalf("read %s through a swap: %q", name, data)
			}
		}
	}
}

// swap exchanges the names a and b by renames.
func swap(dir, a, b string) {
	tmp := filepath.Join(dir, "tmp")
	_ = os.Rename(filepath.Join(dir, a), tmp)
	_ = os.Rename(filepath.Join(dir, b), filepath.Join(dir, a))
	_ = os.Rename(tmp, filepath.Join(dir, b))
}

// TestDirsHoldingReadsListingsOnly: the walk names the directories holding a .git of any type,
// outermost first, does not go through a link or into a skipped directory, and RemoveAll takes
// a .git away without following a symlinked parent.
func TestDirsHoldingReadsListingsOnly(t *testing.T) {
	t.Parallel()
	dir, outside := t.TempDir(), t.TempDir()
	for _, d := range []string{".git", "a/.git", "a/inner/.git", "b/c", "node_modules/x/.git", filepath.Join(outside, ".git")} {
		if err := os.MkdirAll(filepath.Join(map[bool]string{true: "", false: dir}[filepath.IsAbs(d)], d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "b/c/.git"), []byte("gitdir: /elsewhere/.git\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	tr, err := hostile.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	got, err := tr.DirsHolding(context.Background(), ".git", func(d string) bool { return path.Base(d) == "node_modules" }, 1000)
	if err != nil || !slices.Equal(got, []string{"a", "b/c"}) {
		t.Fatalf("DirsHolding = %v, %v; want [a b/c]", got, err)
	}
	if err := tr.RemoveAll("l/.git"); !errors.Is(err, hostile.ErrSymlink) {
		t.Errorf("RemoveAll through a link: %v, want ErrSymlink", err)
	}
	if _, err := os.Stat(filepath.Join(outside, ".git")); err != nil {
		t.Errorf("the link's target lost its .git: %v", err)
	}
	if err := tr.RemoveAll("a/.git"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "a/.git")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a/.git still there: %v", err)
	}
}
