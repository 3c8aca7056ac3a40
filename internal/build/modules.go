package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/webordinary/webordinary/internal/hostile"
	"github.com/webordinary/webordinary/internal/metrics"
	"github.com/webordinary/webordinary/internal/sandbox"
)

// The prepared node_modules store (Packages' second half) saves a new site the install itself,
// not only the download: the platform installs a site's dependencies once per key, and every
// later install with that key is a copy of the result.
//
// The key is a hash of exactly what determines the tree: package.json, the lockfile and
// .npmrc (when the site has one), the Node and npm versions, the install command, the
// architecture and the install's variables that are the tenant's (the project's and the
// global passed ones: what is not the platform's own fill environment). The tree is built by
// `npm ci` in a jail whose one writable path is a fresh scratch directory holding only those
// files, with the install's environment but a home of its own, so its content depends only on
// the key: a hostile lockfile or install script spoils only the entry of its own exact key,
// which any install with that key would have run the same way. Then the platform makes it
// root's and read-only (only directories, regular files and symlinks are kept, no set-id
// bit) and renames it into place. A site whose install needs more than those files (a
// lifecycle script of its own, workspaces, file: or link: packages) is installed in its
// workspace as before.
//
// A site gets the tree through package hostile's Graft (the workspace is the job's): its
// node_modules is removed, the directories and symlinks are made anew, and the files are
// hard links to the entry's when jobs run as another user than root (Config.Link: a job can
// then neither write, chmod nor chown a file root owns read-only, and sandbox.Own leaves such
// shared files alone), or copies otherwise. A job can only unlink its links, never change
// what another site gets.

// modulesDir holds the entries (the package cache's eviction skips names with a dot).
func (p *Packages) modulesDir() string { return filepath.Join(p.Dir, ".modules") }

// installInputs are the site's files that determine its node_modules.
type installInputs struct {
	names []string // package.json, the lockfile, .npmrc when there is one
	data  map[string][]byte
}

// readInputs reads the site's install inputs from the job's tree (through package hostile);
// ok is false when its install cannot be prepared apart from the site (see shareable).
func readInputs(ctx context.Context, dir string) (in installInputs, ok bool) {
	tree, err := hostile.Open(dir)
	if err != nil {
		return in, false
	}
	defer tree.Close()
	in.data = map[string][]byte{}
	for _, f := range []struct {
		name     string
		optional bool
	}{{"package.json", false}, {"npm-shrinkwrap.json", true}, {"package-lock.json", true}, {".npmrc", true}} {
		data, err := tree.ReadFile(ctx, f.name, maxLockfile)
		if errors.Is(err, fs.ErrNotExist) && f.optional {
			continue
		}
		if err != nil {
			return in, false
		}
		in.names, in.data[f.name] = append(in.names, f.name), data
	}
	return in, shareable(in)
}

// lifecycle are the root package's scripts npm runs on install: they read the site's other
// files, which a prepared install does not have.
var lifecycle = []string{"preinstall", "install", "postinstall", "prepublish", "preprepare", "prepare", "postprepare", "dependencies"}

// shareable reports whether the inputs alone determine the install: one lockfile, no
// lifecycle script or workspaces of the site's own, only packages from a registry or git.
func shareable(in installInputs) bool {
	var pkg struct {
		Scripts    map[string]json.RawMessage `json:"scripts"`
		Workspaces json.RawMessage            `json:"workspaces"`
	}
	if json.Unmarshal(in.data["package.json"], &pkg) != nil || len(pkg.Workspaces) > 0 {
		return false
	}
	for _, s := range lifecycle {
		if _, ok := pkg.Scripts[s]; ok {
			return false
		}
	}
	locks := 0
	for _, name := range []string{"npm-shrinkwrap.json", "package-lock.json"} {
		if data, ok := in.data[name]; ok {
			locks++
			if !registryOnly(data) {
				return false
			}
		}
	}
	return locks == 1
}

// registryOnly reports whether every package of the lockfile is installed from a download
// (no link, no file: path, nothing outside node_modules).
func registryOnly(data []byte) bool {
	var lock struct {
		Packages map[string]struct {
			Resolved string `json:"resolved"`
			Link     bool   `json:"link"`
		} `json:"packages"`
	}
	if json.Unmarshal(data, &lock) != nil || len(lock.Packages) == 0 {
		return false
	}
	for path, pkg := range lock.Packages {
		if path != "" && !strings.HasPrefix(path, "node_modules/") || pkg.Link || strings.HasPrefix(pkg.Resolved, "file:") {
			return false
		}
	}
	return true
}

// installCommand is the install a prepared tree is made with.
const installCommand = "npm ci --no-audit --no-fund"

// modulesKey names the entry of inputs installed with cfg's environment.
func (p *Packages) modulesKey(in installInputs, cfg Config) string {
	h := sha256.New()
	fmt.Fprintf(h, "webordinary modules 1\x00%s\x00%s\x00%s\x00", p.toolchain(cfg.FillEnv), runtime.GOARCH, installCommand)
	for _, name := range in.names {
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(in.data[name]))
		h.Write(in.data[name])
	}
	for _, e := range tenantEnv(cfg) {
		fmt.Fprintf(h, "%s\x00", e)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// tenantEnv is the sorted part of the install's environment that is the tenant's: neither
// its home nor the platform's own (FillEnv: the base variables and the job's egress).
func tenantEnv(cfg Config) []string {
	var out []string
	for _, e := range cfg.Env {
		if !strings.HasPrefix(e, "HOME=") && !slices.Contains(cfg.FillEnv, e) {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return out
}

// toolchain is the worker's `node --version` and `npm --version`, asked once (not under
// one job's context: its end would stay in every later key). It runs as the platform,
// unjailed, so in the platform's own environment (env: FillEnv, else this process's), never
// the job's: npm would read the settings in the job's home.
func (p *Packages) toolchain(env []string) string {
	p.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, tool := range []string{"node", "npm"} {
			cmd := exec.CommandContext(ctx, tool, "--version")
			if len(env) > 0 {
				cmd.Env = env
			}
			out, err := cmd.Output()
			if err != nil {
				out = []byte("unknown " + err.Error())
			}
			p.tools += tool + " " + strings.TrimSpace(string(out)) + "\n"
		}
	})
	return p.tools
}

// modules installs the site at dir from the prepared store, preparing its entry first when
// there is none, and reports whether it did; anything that stops it is logged and leaves the
// install to the site's own npm ci.
func (p *Packages) modules(ctx context.Context, dir, lock string, cfg Config, log *tail) bool {
	in, ok := readInputs(ctx, dir)
	if !ok {
		return false
	}
	key := p.modulesKey(in, cfg)
	start, entry := time.Now(), filepath.Join(p.modulesDir(), key)
	outcome := "hit"
	if fi, err := os.Lstat(entry); err == nil && fi.IsDir() {
		now := time.Now()
		_ = os.Chtimes(entry, now, now) // recently used
	} else {
		if p.failedLately(key) {
			fmt.Fprintf(log, "\nwebordinary: preparing these node_modules failed within the last %v; installing in the site\n", retryFailed)
			return false
		}
		if err := p.prepare(ctx, dir, lock, in, entry, cfg, log); err != nil {
			fmt.Fprintf(log, "\nwebordinary: node_modules were not prepared (%v); installing in the site\n", err)
			metrics.ModuleInstalls.WithLabelValues("build_failed").Inc()
			p.noteFailed(ctx, key)
			return false
		}
		outcome = "built"
		p.evictModules(entry)
	}
	n, err := graftChecked(dir, entry, cfg)
	if err != nil {
		fmt.Fprintf(log, "\nwebordinary: the prepared node_modules were not copied (%v); installing in the site\n", err)
		metrics.ModuleInstalls.WithLabelValues("graft_failed").Inc()
		return false
	}
	metrics.ModuleInstalls.WithLabelValues(outcome).Inc()
	fmt.Fprintf(log, "\nwebordinary: node_modules (%d entries) from the platform's prepared store (%s) in %v\n",
		n, outcome, time.Since(start).Round(time.Millisecond))
	return true
}

// retryFailed is how long a key whose preparation failed is installed in the site instead
// (an out-of-date lockfile fails every time; a network failure may not).
const retryFailed = time.Hour

// failedMark is the file noting when key's preparation last failed.
func (p *Packages) failedMark(key string) string {
	return filepath.Join(p.modulesDir(), ".failed-"+key)
}

// failedLately reports whether key's preparation failed within retryFailed.
func (p *Packages) failedLately(key string) bool {
	fi, err := os.Stat(p.failedMark(key))
	return err == nil && time.Since(fi.ModTime()) < retryFailed
}

// noteFailed marks key's preparation as failed, unless the job ended it.
func (p *Packages) noteFailed(ctx context.Context, key string) {
	if ctx.Err() == nil {
		_ = os.WriteFile(p.failedMark(key), nil, 0o644)
		now := time.Now()
		_ = os.Chtimes(p.failedMark(key), now, now)
	}
}

// prepare installs inputs in a fresh scratch directory, in a jail of its own, and moves the
// sealed node_modules to entry.
func (p *Packages) prepare(ctx context.Context, dir, lock string, in installInputs, entry string, cfg Config, log *tail) error {
	scratch, err := p.scratch(in)
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	work, home := filepath.Join(scratch, "work"), filepath.Join(scratch, "home")
	ci := installCommand
	if p.seed(lock, home, Config{}, log) {
		ci += " --prefer-offline" // the lockfile pins every package and its integrity
	} else {
		done := make(chan struct{})
		go func() { defer close(done); p.fill(ctx, dir, lock, cfg, log) }()
		defer func() { <-done }()
	}
	env := append(slices.DeleteFunc(slices.Clone(cfg.Env), func(e string) bool { return strings.HasPrefix(e, "HOME=") }), "HOME="+home)
	jail, err := p.jail(scratch, cfg)
	if err != nil {
		return err
	}
	if err := shell(ctx, work, ci, log, env, jail); err != nil {
		return fmt.Errorf("%s: %w", ci, err)
	}
	return place(filepath.Join(work, "node_modules"), entry)
}

// place seals the prepared node_modules and renames it to entry; another install that
// prepared the same key meanwhile is as good.
func place(modules, entry string) error {
	if fi, err := os.Lstat(modules); err != nil || !fi.IsDir() {
		return errors.New("the install made no node_modules directory") // a link would lead the copy out
	}
	if err := sealModules(modules); err != nil {
		return err
	}
	if err := os.Rename(modules, entry); err != nil && !errors.Is(err, fs.ErrExist) && !errors.Is(err, syscall.ENOTEMPTY) {
		return err
	}
	return nil
}

// scratch makes a fresh directory holding work/ with the inputs and an empty home/.
func (p *Packages) scratch(in installInputs) (string, error) {
	if err := os.MkdirAll(p.modulesDir(), 0o755); err != nil {
		return "", err
	}
	scratch, err := os.MkdirTemp(p.modulesDir(), ".prep-")
	if err != nil {
		return "", err
	}
	err = os.Chmod(scratch, 0o755)
	for _, d := range []string{"work", "home"} {
		err = errors.Join(err, os.Mkdir(filepath.Join(scratch, d), 0o755))
	}
	for _, name := range in.names {
		err = errors.Join(err, os.WriteFile(filepath.Join(scratch, "work", name), in.data[name], 0o644))
	}
	if err != nil {
		os.RemoveAll(scratch)
		return "", err
	}
	return scratch, nil
}

// jail is the prepared install's jail (FillJail: scratch is its one writable path), none when
// installs run unsandboxed.
func (p *Packages) jail(scratch string, cfg Config) (*sandbox.Jail, error) {
	if cfg.FillJail == nil {
		return nil, nil
	}
	return cfg.FillJail(scratch)
}

// sealModules makes a prepared tree root's and read-only: directories 0755, regular files
// 0444 (0555 when executable, never a set-id bit), symlinks as they are; anything else is
// removed.
func sealModules(dir string) error {
	root := os.Geteuid() == 0
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		t := d.Type()
		if !t.IsDir() && !t.IsRegular() && t&fs.ModeSymlink == 0 {
			return os.Remove(p)
		}
		if err := os.Lchown(p, 0, 0); err != nil && root {
			return err
		}
		switch {
		case t.IsDir():
			return os.Chmod(p, 0o755)
		case t.IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			mode := fs.FileMode(0o444)
			if fi.Mode().Perm()&0o111 != 0 {
				mode = 0o555
			}
			return os.Chmod(p, mode)
		}
		return nil
	})
}

// duringGraft, when set (tests), runs after the graft and before graftChecked's check.
var duringGraft func()

// graftChecked is graftModules, then a check that entry is still the one it began with: an
// eviction meanwhile (retire renames before it removes anything) may have left the site a
// partial copy, which is removed and reported.
func graftChecked(dir, entry string, cfg Config) (int, error) {
	before, err := os.Lstat(entry)
	if err != nil {
		return 0, err
	}
	n, err := graftModules(dir, entry, cfg)
	if err != nil {
		return n, err
	}
	if duringGraft != nil {
		duringGraft()
	}
	if after, err := os.Lstat(entry); err != nil || !os.SameFile(before, after) {
		if tree, err := hostile.Open(dir); err == nil {
			_ = tree.RemoveAll("node_modules")
			tree.Close()
		}
		return 0, errors.New("the prepared entry was evicted while it was copied")
	}
	return n, nil
}

// graftModules replaces the site's node_modules with entry (see Tree.Graft), gives what it
// made to the job's user, and returns the number of entries.
func graftModules(dir, entry string, cfg Config) (int, error) {
	tree, err := hostile.Open(dir)
	if err != nil {
		return 0, err
	}
	defer tree.Close()
	if err := tree.RemoveAll("node_modules"); err != nil {
		return 0, err
	}
	n, err := tree.Graft("node_modules", entry, cfg.Link)
	if err == nil && cfg.Own != nil {
		err = cfg.Own(filepath.Join(dir, "node_modules"))
	}
	if err != nil {
		_ = tree.RemoveAll("node_modules")
	}
	return n, err
}

// evictModules removes the least recently used entries, never keep, until the rest fit
// ModulesMaxBytes.
func (p *Packages) evictModules(keep string) {
	max := p.ModulesMaxBytes
	if max == 0 {
		max = 4 << 30
	}
	metrics.ModulesBytes.Set(float64(evictLRU(p.modulesDir(), keep, max)))
	marks, _ := filepath.Glob(p.failedMark("*"))
	for _, m := range marks {
		if fi, err := os.Stat(m); err == nil && time.Since(fi.ModTime()) >= retryFailed {
			_ = os.Remove(m)
		}
	}
}
