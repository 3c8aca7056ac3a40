package workspace_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/workspace"
)

// origin makes a bare repository with one commit on main and returns its path.
func origin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bare, seed := filepath.Join(dir, "origin.git"), filepath.Join(dir, "seed")
	run(t, dir, "git", "init", "--quiet", "--bare", "--initial-branch=main", bare)
	run(t, dir, "git", "init", "--quiet", "--initial-branch=main", seed)
	write(t, filepath.Join(seed, "index.html"), "<h1>hello</h1>")
	run(t, seed, "git", "add", "-A")
	run(t, seed, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "init")
	run(t, seed, "git", "push", "--quiet", bare, "main")
	return bare
}

func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestThreadBranchCommitPushAndRetryFromHead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	remote := origin(t)
	ws := &workspace.Workspace{Dir: filepath.Join(t.TempDir(), "site", "alice"), Remote: remote}
	if err := ws.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ws.Checkout(ctx, "thread-t1", "main"); err != nil {
		t.Fatal(err)
	}
	base, _ := ws.Head(ctx)
	write(t, filepath.Join(ws.Dir, "index.html"), "<h1>green</h1>")
	if _, err := ws.Stage(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	sha, ok, err := ws.Commit(ctx, "make it green", workspace.Author{Name: "alice", Email: "alice@example.com"},
		[]string{"Command-Id: j1", "Thread-Id: t1"})
	if err != nil || !ok {
		t.Fatalf("commit: %v %v", ok, err)
	}
	if err := ws.Push(ctx, "thread-t1"); err != nil {
		t.Fatal(err)
	}
	if got := run(t, remote, "git", "rev-parse", "refs/heads/thread-t1"); got != sha {
		t.Fatalf("remote thread-t1 = %s, want %s", got, sha)
	}
	if found, _ := ws.FindTrailer(ctx, "HEAD", "Command-Id", "j1"); found != sha {
		t.Fatalf("FindTrailer = %q, want %s", found, sha)
	}
	changes, stat, err := ws.Changes(ctx, base, sha)
	if err != nil || len(changes) != 1 || changes[0] != (workspace.Change{Status: "M", Path: "index.html"}) || !strings.Contains(stat, "1 file changed") {
		t.Fatalf("changes = %+v %q %v", changes, stat, err)
	}
	if author := run(t, ws.Dir, "git", "log", "-1", "--format=%an <%ae>"); author != "alice <alice@example.com>" {
		t.Fatalf("author %q", author)
	}
	// A crash leaves a half-edited tree; the retry starts from the branch head.
	write(t, filepath.Join(ws.Dir, "index.html"), "half")
	write(t, filepath.Join(ws.Dir, "stray.txt"), "stray")
	if err := ws.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ws.Checkout(ctx, "thread-t1", "main"); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(ws.Dir, "index.html")); string(data) != "<h1>green</h1>" {
		t.Fatalf("after retry checkout index.html = %q", data)
	}
	if _, err := os.Stat(filepath.Join(ws.Dir, "stray.txt")); !os.IsNotExist(err) {
		t.Fatal("stray file survived the retry checkout")
	}
	if _, err := ws.Stage(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := ws.Commit(ctx, "nothing", workspace.Author{Name: "a", Email: "a@b"}, nil); ok {
		t.Fatal("committed with no changes")
	}
}

func TestFreshWorkspaceTracksRemoteThreadBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	remote := origin(t)
	first := &workspace.Workspace{Dir: filepath.Join(t.TempDir(), "a"), Remote: remote}
	_ = first.Sync(ctx)
	_ = first.Checkout(ctx, "thread-x", "main")
	write(t, filepath.Join(first.Dir, "new.txt"), "from the first worker")
	_, _ = first.Stage(ctx, nil, nil)
	sha, _, _ := first.Commit(ctx, "add", workspace.Author{Name: "a", Email: "a@b"}, nil)
	if err := first.Push(ctx, "thread-x"); err != nil {
		t.Fatal(err)
	}
	// Another worker (another disk) continues the thread from the remote branch.
	second := &workspace.Workspace{Dir: filepath.Join(t.TempDir(), "b"), Remote: remote}
	if err := second.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := second.Checkout(ctx, "thread-x", "main"); err != nil {
		t.Fatal(err)
	}
	if head, _ := second.Head(ctx); head != sha {
		t.Fatalf("second worker at %s, want the thread head %s", head, sha)
	}
	if err := second.Checkout(ctx, "thread-y", "nope"); err == nil || !strings.Contains(err.Error(), "default-branch") {
		t.Fatalf("missing default branch: %v", err)
	}
}

func TestPushWithTokenNeverInURLOrError(t *testing.T) {
	t.Setenv("WO_GIT_TOKEN", "s3cret-token")
	env, err := workspace.AskpassEnv(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := &workspace.Workspace{Dir: filepath.Join(t.TempDir(), "w"), Remote: "https://127.0.0.1:1/nope.git", Env: env}
	err = ws.Sync(context.Background())
	if err == nil {
		t.Fatal("clone of an unreachable remote succeeded")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("token leaked into the error: %v", err)
	}
	ws.Remote = "https://user:s3cret-token@127.0.0.1:1/nope.git"
	if err := ws.Sync(context.Background()); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("credentials in a URL leaked into the error: %v", err)
	}
}

// TestStaleLockFromAKilledGitIsCleared: a git killed mid-command leaves .git/index.lock; the
// next sync (under the tenant's lease) removes it so the tenant is not stuck forever.
func TestStaleLockFromAKilledGitIsCleared(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ws := &workspace.Workspace{Dir: filepath.Join(t.TempDir(), "w"), Remote: origin(t)}
	if err := ws.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws.Dir, ".git", "index.lock"), "")
	if err := ws.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ws.Checkout(ctx, "thread-t1", "main"); err != nil {
		t.Fatalf("checkout after a stale lock: %v", err)
	}
}

func TestStageLeavesBuildOutputAndNodeModulesOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ws := &workspace.Workspace{Dir: filepath.Join(t.TempDir(), "ws"), Remote: origin(t)}
	if err := ws.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ws.Checkout(ctx, "thread-b", "main"); err != nil {
		t.Fatal(err)
	}
	base, _ := ws.Head(ctx)
	for _, f := range []string{"src/page.html", "dist/env.txt", "node_modules/x/index.js", "sub/node_modules/y.js"} {
		write(t, filepath.Join(ws.Dir, f), "content of "+f)
	}
	if _, err := ws.Stage(ctx, nil, []string{"dist"}); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws.Dir, "written-by-build.txt"), "after staging")
	sha, ok, err := ws.Commit(ctx, "edit", workspace.Author{Name: "a", Email: "a@b"}, nil)
	if err != nil || !ok {
		t.Fatalf("commit: %v %v", ok, err)
	}
	changes, _, err := ws.Changes(ctx, base, sha)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].Path != "src/page.html" {
		t.Errorf("committed %v, want only src/page.html (no build output, node_modules or later files)", changes)
	}
}

func TestPlatformGitRunsNoHooksOrFsmonitor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ws := &workspace.Workspace{Dir: filepath.Join(t.TempDir(), "ws"), Remote: origin(t)}
	if err := ws.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ws.Checkout(ctx, "thread-h", "main"); err != nil {
		t.Fatal(err)
	}
	pwned := filepath.Join(t.TempDir(), "pwned")
	hook := "#!/bin/sh\ntouch " + pwned + "\n"
	write(t, filepath.Join(ws.Dir, ".git", "hooks", "pre-commit"), hook)
	write(t, filepath.Join(ws.Dir, ".git", "hooks", "post-commit"), hook)
	for _, h := range []string{"pre-commit", "post-commit"} {
		if err := os.Chmod(filepath.Join(ws.Dir, ".git", "hooks", h), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(ws.Dir, "fsmonitor.sh"), hook)
	_ = os.Chmod(filepath.Join(ws.Dir, "fsmonitor.sh"), 0o755)
	cfg, _ := os.ReadFile(filepath.Join(ws.Dir, ".git", "config"))
	write(t, filepath.Join(ws.Dir, ".git", "config"), string(cfg)+"[core]\n\tfsmonitor = "+filepath.Join(ws.Dir, "fsmonitor.sh")+"\n")
	write(t, filepath.Join(ws.Dir, "page.html"), "edit")
	if _, err := ws.Status(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Stage(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ws.Commit(ctx, "edit", workspace.Author{Name: "a", Email: "a@b"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("the platform's git ran a hook or fsmonitor command planted in the workspace")
	}
}
