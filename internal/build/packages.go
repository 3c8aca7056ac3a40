package build

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/webordinary/webordinary/internal/hostile"
	"github.com/webordinary/webordinary/internal/metrics"
	"github.com/webordinary/webordinary/internal/sandbox"
)

// Packages is the package cache every tenant's installs share, so that a new site whose
// lockfile another site already used installs without downloading. It is the platform's: no
// job's jail binds it, and a job never writes into it.
//
// Each entry is npm's cache (_cacache) for one lockfile, named by the lockfile's hash. The
// platform fills a missing entry while the site's own install runs (which downloads as
// before): `npm cache add name@version...` for the lockfile's packages from npm's registry
// (names and versions checked, nothing else of the lockfile or the site used), in a jail of its
// own whose one writable path is a fresh scratch directory, with the platform's environment
// (never the project's variables, .npmrc or registry). Nothing is unpacked and no tenant code
// runs while an entry is written, so what it holds under the registry's addresses is what the
// registry served. The fill's cache then becomes root's, read-only, and is renamed into place.
//
// A later install of that lockfile (another tenant's new site) gets a copy: the platform
// copies the entry into the tenant's own npm cache (its build home, through os.Root, creating
// only files that are not there) and gives the copies to the job's user; npm ci then runs
// with --prefer-offline and checks every package against the lockfile's integrity as always.
// A tenant can spoil only its own copy.
type Packages struct {
	// Dir holds the entries. Jobs' users must be able to enter it (the fill's scratch
	// directory is inside), and no jail may bind it.
	Dir string
	// MaxBytes bounds the entries' total size; the least recently used go first. Default 4 GiB.
	MaxBytes int64
	// ModulesMaxBytes bounds the prepared node_modules trees (see modules.go, in
	// Dir/.modules) likewise. Default 4 GiB.
	ModulesMaxBytes int64

	once  sync.Once // asks the toolchain's versions
	tools string
}

// fillCommand downloads the packages named in the file specs into the scratch cache.
const fillCommand = "xargs -n 200 npm cache add --cache ../cache --no-audit --no-fund < specs"

// entry is the directory of the lockfile with hash lock ("sha256:..." from lockHash).
func (p *Packages) entry(lock string) string {
	return filepath.Join(p.Dir, strings.ReplaceAll(lock, ":", "-"))
}

// seed copies the entry of lock into the npm cache under home and reports whether there was
// one; a failed copy is logged and left to the install, which then downloads.
func (p *Packages) seed(lock, home string, cfg Config, log *tail) bool {
	entry := p.entry(lock)
	if _, err := os.Stat(entry); err != nil {
		return false
	}
	now := time.Now()
	_ = os.Chtimes(entry, now, now) // recently used
	if err := seed(entry, home, cfg.Own); err != nil {
		fmt.Fprintf(log, "\nwebordinary: the shared package cache was not copied (%v); installing from the registry\n", err)
		return false
	}
	metrics.PackageInstalls.WithLabelValues("hit").Inc()
	return true
}

// fill makes the entry of the site's lockfile; what fails is logged (the site's own install
// does not depend on it).
func (p *Packages) fill(ctx context.Context, dir, lock string, cfg Config, log *tail) {
	start, entry := time.Now(), p.entry(lock)
	if err := p.fillEntry(ctx, dir, entry, cfg); err != nil {
		fmt.Fprintf(log, "\nwebordinary: the shared package cache was not filled: %v\n", err)
		metrics.PackageInstalls.WithLabelValues("fill_failed").Inc()
		return
	}
	metrics.PackageInstalls.WithLabelValues("filled").Inc()
	fmt.Fprintf(log, "\nwebordinary: shared package cache filled in %v\n", time.Since(start).Round(time.Millisecond))
	p.evict(entry)
}

// fillEntry runs the fill for the lockfile of the site at dir and moves its cache to entry.
func (p *Packages) fillEntry(ctx context.Context, dir, entry string, cfg Config) error {
	specs, err := lockedSpecs(ctx, dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return err
	}
	scratch, err := os.MkdirTemp(p.Dir, ".fill-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	if err := os.Chmod(scratch, 0o755); err != nil {
		return err
	}
	for _, d := range []string{"work", "home", "cache"} {
		if err := os.Mkdir(filepath.Join(scratch, d), 0o755); err != nil {
			return err
		}
	}
	work := filepath.Join(scratch, "work")
	if err := os.WriteFile(filepath.Join(work, "specs"), []byte(strings.Join(specs, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	var jail *sandbox.Jail
	if cfg.FillJail != nil {
		if jail, err = cfg.FillJail(scratch); err != nil {
			return err
		}
	}
	env := append(slices.Clone(cfg.FillEnv), "HOME="+filepath.Join(scratch, "home"))
	out := newTail(1 << 10) // the fill's own: the site's build log stays the site's
	if err := shell(ctx, work, fillCommand, out, env, jail); err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(out.String()))
	}
	cache := filepath.Join(scratch, "cache", "_cacache")
	if err := seal(cache); err != nil {
		return err
	}
	if err := os.Rename(cache, entry); err != nil && !errors.Is(err, fs.ErrExist) && !errors.Is(err, syscall.ENOTEMPTY) {
		return err
	}
	return nil
}

// Package names and versions as npm's registry has them: a spec built from them cannot be
// read as an option or as anything but a registry package.
var (
	packageName    = regexp.MustCompile(`^(@[a-z0-9~-][a-z0-9._~-]*/)?[a-z0-9~-][a-z0-9._~-]*$`)
	packageVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
)

// lockedSpecs are name@version for each registry package of the site's lockfile (v2 or v3),
// read from the job's tree; packages from elsewhere (git, a file, another URL) are left out.
func lockedSpecs(ctx context.Context, dir string) ([]string, error) {
	tree, err := hostile.Open(dir)
	if err != nil {
		return nil, err
	}
	defer tree.Close()
	var data []byte
	for _, name := range []string{"npm-shrinkwrap.json", "package-lock.json"} {
		if data, err = tree.ReadFile(ctx, name, maxLockfile); !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	var lock struct {
		Packages map[string]struct {
			Name, Version, Resolved, Integrity string
			Link                               bool
		} `json:"packages"`
	}
	if err := json.Unmarshal(data, &lock); err != nil {
		return nil, fmt.Errorf("the lockfile: %w", err)
	}
	var specs []string
	for path, pkg := range lock.Packages {
		i := strings.LastIndex(path, "node_modules/")
		if i < 0 || pkg.Link || pkg.Integrity == "" {
			continue
		}
		name := cmp.Or(pkg.Name, path[i+len("node_modules/"):])
		if pkg.Resolved != "" && !strings.HasPrefix(pkg.Resolved, defaultRegistry) {
			continue
		}
		if packageName.MatchString(name) && packageVersion.MatchString(pkg.Version) {
			specs = append(specs, name+"@"+pkg.Version)
		}
	}
	if len(specs) == 0 {
		return nil, errors.New("the lockfile names no package from npm's registry")
	}
	slices.Sort(specs)
	return slices.Compact(specs), nil
}

// defaultRegistry is where the fill downloads from.
const defaultRegistry = "https://registry.npmjs.org/"

// seal makes the fill's cache root's and read-only, keeping only directories and regular
// files (npm's cache holds nothing else).
func seal(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch t := d.Type(); {
		case t.IsDir():
			if err := os.Lchown(p, 0, 0); err != nil && os.Geteuid() == 0 {
				return err
			}
			return os.Chmod(p, 0o755)
		case t.IsRegular():
			if err := os.Lchown(p, 0, 0); err != nil && os.Geteuid() == 0 {
				return err
			}
			return os.Chmod(p, 0o444)
		default:
			return os.Remove(p)
		}
	})
}

// seed copies entry into the npm cache under home (home/.npm/_cacache), through os.Root so
// that nothing the job left there (links) leads the platform's writes elsewhere, creating
// only files that are not there yet; own then gives the job's user what was written.
func seed(entry, home string, own func(string) error) error {
	root, err := os.OpenRoot(home)
	if err != nil {
		return err
	}
	defer root.Close()
	const dest = ".npm/_cacache"
	err = filepath.WalkDir(entry, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(entry, p)
		to := filepath.Join(dest, rel)
		if d.IsDir() {
			return root.MkdirAll(to, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return copyNew(root, p, to)
	})
	if err != nil {
		return err
	}
	if own != nil {
		return own(filepath.Join(home, ".npm"))
	}
	return nil
}

// copyNew copies the file at from to name in root unless something is already there.
func copyNew(root *os.Root, from, name string) error {
	out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	in, err := os.Open(from)
	if err != nil {
		out.Close()
		return err
	}
	defer in.Close()
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

// evict removes the least recently used entries, never keep, until the rest fit MaxBytes.
func (p *Packages) evict(keep string) {
	max := p.MaxBytes
	if max == 0 {
		max = 4 << 30
	}
	metrics.PackageCacheBytes.Set(float64(evictLRU(p.Dir, keep, max)))
}

// evictLRU removes the least recently used (by modification time) directories of dir, never
// keep nor one whose name starts with a dot, until the rest fit max bytes; it returns their
// size.
func evictLRU(dir, keep string, max int64) int64 {
	dirs, _ := os.ReadDir(dir)
	type use struct {
		path string
		size int64
		at   time.Time
	}
	var uses []use
	var total int64
	for _, d := range dirs {
		if d.IsDir() && strings.HasPrefix(d.Name(), retiredPrefix) {
			_ = os.RemoveAll(filepath.Join(dir, d.Name())) // a crash's leftover
		}
		if !d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			continue
		}
		path := filepath.Join(dir, d.Name())
		fi, err := d.Info()
		if err != nil {
			continue
		}
		u := use{path: path, size: dirSize(path), at: fi.ModTime()}
		uses, total = append(uses, u), total+u.size
	}
	sort.Slice(uses, func(i, j int) bool { return uses[i].at.Before(uses[j].at) })
	for _, u := range uses {
		if total <= max {
			break
		}
		if u.path != keep && retire(u.path) == nil {
			total -= u.size
		}
	}
	return total
}

// retiredPrefix names entries being removed: readers never look a dot name up.
const retiredPrefix = ".retired-"

// retire takes the store entry at path out of the store at once (a rename to a dot name), then
// removes it, so a reader that checks the entry after using it (graftChecked) sees it gone
// rather than having read it half removed. What a crash left retired is removed by the next
// eviction's pass over the store.
func retire(path string) error {
	gone := filepath.Join(filepath.Dir(path), retiredPrefix+filepath.Base(path)+"-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := os.Rename(path, gone); err != nil {
		return err
	}
	return os.RemoveAll(gone)
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
