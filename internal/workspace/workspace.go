// Package workspace keeps a tenant's working copy of a site's repository: clone on first use,
// fetch after, check out a thread's branch from its head (never from a half-edited tree),
// commit with trailers as the platform, find an earlier job's commit, and push with a token
// that never appears in a URL, a log line or a result. It drives the real git CLI.
package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/webordinary/webordinary/internal/hostile"
)

// Workspace is one tenant's working copy.
type Workspace struct {
	// Dir is the working tree; the same absolute path on every worker.
	Dir string
	// Remote is the repository URL (https, ssh, or a local path).
	Remote string
	// Env is added to git's environment (credentials helper, see AskpassEnv).
	Env []string
	// Log receives git's output; may be nil.
	Log io.Writer
}

// Author is who a commit is attributed to.
type Author struct{ Name, Email string }

// Change is one changed path.
type Change struct {
	Status string `json:"status"` // A, M, D, R...
	Path   string `json:"path"`
}

// Sync clones the repository on first use (or when the directory is not a usable clone) and
// fetches otherwise.
func (w *Workspace) Sync(ctx context.Context) error {
	if _, err := w.git(ctx, "rev-parse", "--git-dir"); err != nil {
		return w.clone(ctx)
	}
	if err := w.clearLocks(); err != nil {
		return err
	}
	if _, err := w.git(ctx, "remote", "set-url", "origin", w.Remote); err != nil {
		return err
	}
	_, err := w.git(ctx, "fetch", "--prune", "--quiet", "origin")
	return err
}

func (w *Workspace) clone(ctx context.Context) error {
	if err := os.RemoveAll(w.Dir); err != nil {
		return fmt.Errorf("workspace: clear %s for a fresh clone: %w", w.Dir, err)
	}
	if err := os.MkdirAll(filepath.Dir(w.Dir), 0o755); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	cmd := w.command(ctx, filepath.Dir(w.Dir), "clone", "--quiet", w.Remote, w.Dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("workspace: git clone %s: %w: %s (check the project's --repo and the token in WO_GIT_TOKEN)",
			redact(w.Remote), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Checkout puts branch's head in the working tree, discarding any half-edited state (and
// any repository a job nested in it, see dropNestedRepos): the
// local branch when it contains the remote's (it may hold a commit not yet pushed), else the
// remote branch, else a new branch from the default branch.
func (w *Workspace) Checkout(ctx context.Context, branch, defaultBranch string) error {
	if err := w.dropNestedRepos(ctx); err != nil {
		return err
	}
	if _, err := w.git(ctx, "reset", "--hard", "--quiet"); err != nil {
		return err
	}
	start, err := w.startPoint(ctx, branch, defaultBranch)
	if err != nil {
		return err
	}
	if _, err := w.git(ctx, "checkout", "--quiet", "-B", branch, start); err != nil {
		return err
	}
	if _, err := w.git(ctx, "clean", "-fdq"); err != nil {
		return err
	}
	return nil
}

func (w *Workspace) startPoint(ctx context.Context, branch, defaultBranch string) (string, error) {
	local, remote := w.exists(ctx, "refs/heads/"+branch), w.exists(ctx, "refs/remotes/origin/"+branch)
	switch {
	case local && remote:
		if _, err := w.git(ctx, "merge-base", "--is-ancestor", "origin/"+branch, branch); err == nil {
			return branch, nil
		}
		return "origin/" + branch, nil
	case local:
		return branch, nil
	case remote:
		return "origin/" + branch, nil
	case w.exists(ctx, "refs/remotes/origin/"+defaultBranch):
		return "origin/" + defaultBranch, nil
	}
	return "", fmt.Errorf("workspace: the repository has no branch %q (set the project's --default-branch)", defaultBranch)
}

func (w *Workspace) exists(ctx context.Context, ref string) bool {
	_, err := w.git(ctx, "rev-parse", "--verify", "--quiet", ref)
	return err == nil
}

// Head returns the commit checked out.
func (w *Workspace) Head(ctx context.Context) (string, error) {
	out, err := w.git(ctx, "rev-parse", "HEAD")
	return strings.TrimSpace(out), err
}

// Staged reports whether the index differs from HEAD.
func (w *Workspace) Staged(ctx context.Context) (bool, error) {
	_, err := w.git(ctx, "diff", "--cached", "--quiet")
	var exit *exec.ExitError
	switch {
	case err == nil:
		return false, nil
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return true, nil
	}
	return false, err
}

// Commit commits what is staged (see Stage) as author, with trailers ("Key: value" lines).
// It reports committed=false, and makes no commit, when nothing is staged.
func (w *Workspace) Commit(ctx context.Context, message string, author Author, trailers []string) (sha string, committed bool, err error) {
	if staged, err := w.Staged(ctx); err != nil || !staged {
		return "", false, err
	}
	args := []string{"-c", "user.name=webordinary", "-c", "user.email=webordinary@localhost",
		"commit", "--quiet", "--no-verify", "--author", fmt.Sprintf("%s <%s>", author.Name, author.Email), "-m", message}
	for _, t := range trailers {
		args = append(args, "--trailer", t)
	}
	if _, err := w.git(ctx, args...); err != nil {
		return "", false, err
	}
	sha, err = w.Head(ctx)
	return sha, err == nil, err
}

// FindTrailer returns the newest commit reachable from ref (among its last 500) whose
// trailer key has value, or "" when there is none.
func (w *Workspace) FindTrailer(ctx context.Context, ref, key, value string) (string, error) {
	out, err := w.git(ctx, "log", "-n", "500", "--format=%H %(trailers:key="+key+",valueonly,separator=%x20)", ref, "--")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\n") {
		sha, vals, _ := strings.Cut(line, " ")
		for _, v := range strings.Fields(vals) {
			if v == value {
				return sha, nil
			}
		}
	}
	return "", nil
}

// Changes lists what changed between two commits, and git's one-line diffstat.
func (w *Workspace) Changes(ctx context.Context, from, to string) ([]Change, string, error) {
	out, err := w.git(ctx, "diff", "--name-status", "--no-renames", from, to, "--")
	if err != nil {
		return nil, "", err
	}
	var changes []Change
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if status, path, ok := strings.Cut(line, "\t"); ok {
			changes = append(changes, Change{Status: status, Path: path})
		}
	}
	stat, err := w.git(ctx, "diff", "--shortstat", from, to, "--")
	return changes, strings.TrimSpace(stat), err
}

// Push pushes HEAD to branch on origin.
func (w *Workspace) Push(ctx context.Context, branch string) error {
	_, err := w.git(ctx, "push", "--quiet", "origin", "HEAD:refs/heads/"+branch)
	return err
}

// Files lists the files of the working tree git would commit (tracked and untracked, not
// ignored), for deploying a site that is the repository itself; never a repository nested in
// it (see Stage), whose inside git is not asked about.
func (w *Workspace) Files(ctx context.Context) ([]string, error) {
	nested, err := nestedRepos(ctx, w.Dir, nil)
	if err != nil {
		return nil, err
	}
	args := []string{"ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "."}
	for _, d := range nested {
		args = append(args, ":(exclude,literal)"+d)
	}
	out, err := w.git(ctx, args...)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(splitZ(out), func(f string) bool { return strings.HasSuffix(f, "/") }), nil
}

func (w *Workspace) git(ctx context.Context, args ...string) (string, error) {
	return w.gitInput(ctx, nil, args...)
}

// gitInput runs git in the working tree with stdin (nil: none).
func (w *Workspace) gitInput(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	cmd := w.command(ctx, w.Dir, args...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errb
	err := cmd.Run()
	if w.Log != nil && errb.Len() > 0 {
		_, _ = w.Log.Write(errb.Bytes())
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return out.String(), fmt.Errorf("workspace: git %s: %w: %s", args[0], err, redact(strings.TrimSpace(errb.String())))
	}
	return out.String(), nil
}

// clearLocks removes lock files a git process killed mid-command left behind. The caller
// holds the tenant's lease, so no other git process works in this repository.
func (w *Workspace) clearLocks() error {
	for _, pattern := range []string{"*.lock", "refs/heads/*.lock", "refs/remotes/origin/*.lock"} {
		locks, _ := filepath.Glob(filepath.Join(w.Dir, ".git", pattern))
		for _, l := range locks {
			if err := os.Remove(l); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("workspace: remove stale %s: %w", l, err)
			}
		}
	}
	return nil
}

func (w *Workspace) command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "git", args...)
	// On cancellation ask git to stop (it cleans up its locks) before killing it.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	cmd.Env = append(cmd.Env, w.Env...)
	cmd.Env = append(cmd.Env, hardened(w.Dir)...)
	return cmd
}

// hardened is configuration for the platform's own git, which runs outside the sandbox on a
// working tree a job wrote: no hooks, no fsmonitor command, no submodule recursion, and only
// this workspace counts as a safe directory (the job's uid owns it; a repository the job
// nested inside stays untrusted).
func hardened(dir string) []string {
	kv := [][2]string{{"safe.directory", dir}, {"core.hooksPath", "/dev/null"}, {"core.fsmonitor", "false"},
		{"submodule.recurse", "false"}, {"diff.ignoreSubmodules", "all"}, {"status.submoduleSummary", "false"},
		{"protocol.ext.allow", "never"}}
	env := []string{fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(kv))}
	for i, p := range kv {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, p[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, p[1]))
	}
	return env
}

var credentials = regexp.MustCompile(`://[^/@\s]+@`)

// redact removes credentials embedded in URLs (https://user:secret@host) from s.
func redact(s string) string { return credentials.ReplaceAllString(s, "://***@") }

// ErrNoToken is returned by AskpassEnv when the platform has no push token configured.
var ErrNoToken = errors.New("no git token")

// AskpassEnv writes (once) a GIT_ASKPASS helper into dir that answers git's prompts from
// WO_GIT_USERNAME (default x-access-token) and WO_GIT_TOKEN in git's environment, and returns
// the variables that enable it. The token never appears in a URL or an argument.
func AskpassEnv(dir string) ([]string, error) {
	if os.Getenv("WO_GIT_TOKEN") == "" {
		return nil, ErrNoToken
	}
	path := filepath.Join(dir, "git-askpass.sh")
	script := "#!/bin/sh\ncase \"$1\" in\n  Username*) printf '%s\\n' \"${WO_GIT_USERNAME:-x-access-token}\" ;;\n  *) printf '%s\\n' \"$WO_GIT_TOKEN\" ;;\nesac\n"
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		return nil, fmt.Errorf("workspace: write askpass helper: %w", err)
	}
	return []string{"GIT_ASKPASS=" + path}, nil
}

// Status lists the paths that differ from HEAD (tracked changes and untracked files, a move
// as its two paths). It leaves out repositories nested in the working tree (see Stage) and
// never looks inside them.
func (w *Workspace) Status(ctx context.Context) ([]string, error) {
	nested, err := nestedRepos(ctx, w.Dir, nil)
	if err != nil {
		return nil, err
	}
	args := []string{"status", "--porcelain", "-z", "--untracked-files=all", "--no-renames", "--ignore-submodules=all", "--", "."}
	for _, d := range nested {
		args = append(args, ":(exclude,literal)"+d)
	}
	out, err := w.git(ctx, args...)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, entry := range strings.Split(out, "\x00") {
		if len(entry) > 3 && !strings.HasSuffix(entry, "/") {
			paths = append(paths, entry[3:])
		}
	}
	return paths, nil
}

// ErrConflict: a merge stopped on conflicting changes.
var ErrConflict = errors.New("merge conflict")

// platformIdentity makes the platform the committer (and the author of its merge commits).
var platformIdentity = []string{"-c", "user.name=webordinary", "-c", "user.email=webordinary@localhost"}

// Merge merges ref into the checked-out branch: a fast-forward when possible, else a merge
// commit by the platform with message and trailers. On conflicting changes it aborts (the
// branch and working tree are as before) and returns an error matching ErrConflict that names
// the paths.
func (w *Workspace) Merge(ctx context.Context, ref, message string, trailers []string) error {
	if len(trailers) > 0 {
		message += "\n\n" + strings.Join(trailers, "\n")
	}
	args := append(slices.Clone(platformIdentity), "merge", "--quiet", "--no-edit", "-m", message, ref)
	_, err := w.git(ctx, args...)
	if err == nil || ctx.Err() != nil {
		return err
	}
	paths, uerr := w.Unmerged(ctx)
	if uerr != nil || len(paths) == 0 {
		return err
	}
	if _, aerr := w.git(ctx, "merge", "--abort"); aerr != nil {
		return aerr
	}
	return fmt.Errorf("%w in %s", ErrConflict, strings.Join(paths, ", "))
}

// MergeStart merges ref into the checked-out branch and, on conflicting changes, leaves the
// merge in progress with conflict markers in the working tree for someone to resolve (then
// Stage and Commit finish it; Checkout abandons it). It returns the conflicting paths; none
// means ref merged cleanly (committed, or fast-forwarded).
func (w *Workspace) MergeStart(ctx context.Context, ref, message string) ([]string, error) {
	args := append(slices.Clone(platformIdentity), "merge", "--quiet", "--no-edit", "-m", message, ref)
	_, err := w.git(ctx, args...)
	if err == nil || ctx.Err() != nil {
		return nil, err
	}
	paths, uerr := w.Unmerged(ctx)
	if uerr != nil || len(paths) == 0 {
		return nil, err
	}
	return paths, nil
}

// Unmerged lists the paths git still has in conflict.
func (w *Workspace) Unmerged(ctx context.Context) ([]string, error) {
	out, err := w.git(ctx, "diff", "--name-only", "--diff-filter=U")
	return strings.Fields(out), err
}

// IsAncestor reports whether commit a is reachable from b (merging a into b changes nothing).
func (w *Workspace) IsAncestor(ctx context.Context, a, b string) bool {
	_, err := w.git(ctx, "merge-base", "--is-ancestor", a, b)
	return err == nil
}

// Restore makes the index and working tree exactly commit's tree (or a tree's, from
// IndexTree), on the checked-out branch; committing that reverts everything since commit.
func (w *Workspace) Restore(ctx context.Context, commit string) error {
	_, err := w.git(ctx, "read-tree", "-u", "--reset", commit)
	return err
}

// IndexTree writes the index (what is staged) as a tree and returns its id; Restore(tree)
// goes back to it.
func (w *Workspace) IndexTree(ctx context.Context) (string, error) {
	out, err := w.git(ctx, "write-tree")
	return strings.TrimSpace(out), err
}

// HasMarkers lists the paths among paths whose content still holds conflict markers. The
// files are the job's (read through package hostile): a link or special file has none.
func (w *Workspace) HasMarkers(ctx context.Context, paths []string) []string {
	tree, err := hostile.Open(w.Dir)
	if err != nil {
		return paths // unreadable: nothing may go live
	}
	defer tree.Close()
	var left []string
	for _, p := range paths {
		data, err := tree.ReadFile(ctx, filepath.FromSlash(p), 64<<20)
		if err == nil && conflictMarker.Match(data) {
			left = append(left, p)
		}
	}
	return left
}

var conflictMarker = regexp.MustCompile(`(?m)^(<{7}|>{7})( |$)`)
