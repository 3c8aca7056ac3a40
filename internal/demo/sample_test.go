package demo

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// gitOut runs git in dir and returns its trimmed output.
func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestCreateSampleRepo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "demo")
	bare, err := CreateSampleRepo(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, SampleRepoName); bare != want {
		t.Errorf("bare repo = %s, want %s", bare, want)
	}
	if got := gitOut(t, bare, "symbolic-ref", "HEAD"); got != "refs/heads/main" {
		t.Errorf("HEAD = %s, want refs/heads/main", got)
	}
	clone := filepath.Join(t.TempDir(), "clone")
	gitOut(t, dir, "clone", "-q", bare, clone)
	if got := gitOut(t, clone, "rev-parse", "--abbrev-ref", "HEAD"); got != "main" {
		t.Errorf("cloned branch = %s, want main", got)
	}
	index := read(t, clone, "index.html")
	for _, s := range []string{"<title>Sunrise Bakery</title>", "<h1>Sunrise Bakery</h1>", "<header>", `<ul class="menu">`, `href="style.css"`} {
		if !strings.Contains(index, s) {
			t.Errorf("index.html lacks %q", s)
		}
	}
	if files := gitOut(t, clone, "ls-files"); files != "about.html\nindex.html\nstyle.css" {
		t.Errorf("files = %q", files)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("dir holds %d entries, want only the bare repository", len(entries))
	}
}

func TestCreateSampleRepoIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	var wg sync.WaitGroup
	paths := make([]string, 4)
	errs := make([]error, 4)
	for i := range paths {
		wg.Go(func() { paths[i], errs[i] = CreateSampleRepo(ctx, dir) })
	}
	wg.Wait()
	for i := range paths {
		if errs[i] != nil || paths[i] != filepath.Join(dir, SampleRepoName) {
			t.Fatalf("call %d: %s, %v", i, paths[i], errs[i])
		}
	}
	head := gitOut(t, paths[0], "rev-parse", "main")
	if _, err := CreateSampleRepo(ctx, dir); err != nil {
		t.Fatal(err)
	}
	if again := gitOut(t, paths[0], "rev-parse", "main"); again != head {
		t.Errorf("main moved from %s to %s on a second call", head, again)
	}
}

func TestCreateSampleRepoErrors(t *testing.T) {
	t.Parallel()
	t.Run("not a repository", func(t *testing.T) {
		t.Parallel()
		dir := setupFiles(t, map[string]string{SampleRepoName + "/notes.txt": "mine"})
		if _, err := CreateSampleRepo(context.Background(), dir); err == nil || !strings.Contains(err.Error(), "not a bare git repository") {
			t.Errorf("error = %v, want one saying it is not a bare git repository", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		dir := t.TempDir()
		if _, err := CreateSampleRepo(ctx, dir); !errors.Is(err, context.Canceled) {
			t.Errorf("error = %v, want context.Canceled", err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("a cancelled call left %d entries", len(entries))
		}
	})
}

// TestSampleRepoEditFlow edits a clone of the sample repository with the demo agent, as the
// platform's workspace would, and commits the result.
func TestSampleRepoEditFlow(t *testing.T) {
	t.Parallel()
	bare, err := CreateSampleRepo(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(t.TempDir(), "work")
	gitOut(t, filepath.Dir(clone), "clone", "-q", bare, clone)
	gitOut(t, clone, "checkout", "-q", "-b", "thread-1")
	if _, _, err := Edit(clone, SampleInstruction+"\nAdd a page called Contact."); err != nil {
		t.Fatal(err)
	}
	if got := gitOut(t, clone, "status", "--porcelain"); got != "M about.html\n M index.html\n M style.css\n?? contact.html" {
		t.Errorf("git status:\n%s", got)
	}
}
