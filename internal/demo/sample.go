package demo

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// SampleRepoName is the bare repository CreateSampleRepo makes in its directory.
const SampleRepoName = "sample-site.git"

// SampleBranch is the sample repository's branch.
const SampleBranch = "main"

//go:embed site
var sampleSite embed.FS

// WriteSampleSite writes the sample site (Sunrise Bakery: index.html, about.html,
// style.css; no build step) into dir, creating it, overwriting files of the same names.
func WriteSampleSite(dir string) error {
	files, _ := fs.Sub(sampleSite, "site")
	return writeTree(files, dir)
}

// writeTree writes the files of fsys into dir, creating it and its subdirectories,
// overwriting files of the same names.
func writeTree(fsys fs.FS, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, filepath.FromSlash(p)), 0o755)
		}
		b, err := fs.ReadFile(fsys, p)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, filepath.FromSlash(p)), b, 0o644)
		}
		return err
	})
}

// CreateSampleRepo makes the sample site's git repository: the site committed on branch main
// and pushed into the bare repository dir/sample-site.git, whose path it returns. It needs
// the git CLI. Idempotent: when the bare repository is there, it returns it untouched. The
// repository appears whole or not at all (it is built aside and renamed into place), so
// concurrent calls are safe.
func CreateSampleRepo(ctx context.Context, dir string) (bareRepo string, err error) {
	return createRepo(ctx, dir, SampleRepoName, WriteSampleSite, "Sunrise Bakery sample site")
}

// createRepo makes the bare repository dir/name holding, on branch main, one commit of the
// files write puts in a directory (see CreateSampleRepo).
func createRepo(ctx context.Context, dir, name string, write func(string) error, message string) (string, error) {
	bare := filepath.Join(dir, name)
	if ok, err := isBareRepo(bare); ok || err != nil {
		return bare, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("demo: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, ".sample-site-*")
	if err != nil {
		return "", fmt.Errorf("demo: %w", err)
	}
	defer os.RemoveAll(tmp)
	built := filepath.Join(tmp, name)
	if err := buildRepo(ctx, filepath.Join(tmp, "work"), built, write, message); err != nil {
		return "", err
	}
	if err := os.Rename(built, bare); err != nil {
		if ok, _ := isBareRepo(bare); ok { // another call won the race
			return bare, nil
		}
		return "", fmt.Errorf("demo: %w", err)
	}
	return bare, nil
}

// isBareRepo reports whether dir is a bare git repository; an existing dir that is not one
// is an error.
func isBareRepo(dir string) (bool, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	for _, name := range []string{"HEAD", "objects", "refs"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return false, fmt.Errorf("demo: %s exists but is not a bare git repository: remove it or choose another directory", dir)
		}
	}
	return true, nil
}

// buildRepo commits the files write puts in work and pushes them into a new bare repository.
func buildRepo(ctx context.Context, work, bare string, write func(string) error, message string) error {
	if err := write(work); err != nil {
		return err
	}
	steps := [][]string{
		{"init", "-q", "-b", SampleBranch, work},
		{"-C", work, "add", "-A"},
		{"-C", work, "commit", "-q", "-m", message},
		{"init", "-q", "--bare", "-b", SampleBranch, bare},
		{"-C", work, "push", "-q", bare, SampleBranch},
	}
	for _, args := range steps {
		if err := git(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

// git runs the git CLI, isolated from the user's and system's git configuration.
func git(ctx context.Context, args ...string) error {
	args = append([]string{"-c", "user.name=Webordinary Demo", "-c", "user.email=demo@webordinary.invalid",
		"-c", "commit.gpgsign=false"}, args...)
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL="+os.DevNull, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, exec.ErrNotFound):
		return fmt.Errorf("demo: git is not installed: install git to create the sample site: %w", err)
	}
	return fmt.Errorf("demo: git %s: %w: %s", gitVerb(args), err, strings.TrimSpace(stderr.String()))
}

// gitVerb is the subcommand in a git command line, for messages.
func gitVerb(args []string) string {
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "-c" || args[i] == "-C":
			i++
		case !strings.HasPrefix(args[i], "-"):
			return args[i]
		}
	}
	return "?"
}
