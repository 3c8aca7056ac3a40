package preview

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/tenant"
)

// DirConfig configures a Dir.
type DirConfig struct {
	// Root holds every project's previews; it is created if missing. Required. Point
	// ServerConfig.Root at the same directory to serve them.
	Root string
	// Domain is the host suffix in reported URLs. Default "localhost".
	Domain string
	// Port is the preview server's port in reported URLs; 0 leaves the port out.
	Port int
	// URLs, when set, replaces URLs(site, Port, Domain) in each Deployment (for example to
	// report https addresses behind a proxy).
	URLs func(Site) []string
	// LiveURL, when set, replaces LiveURL(project, Port, Domain) for production deploys.
	LiveURL func(project string) string
	// Keep is how many versions of each thread survive pruning, the live one included.
	// Default 3. A request in flight on a pruned version is retried on the live one by Server.
	Keep int
	// Logger receives one line per deploy and any pruning failure. Default: discard.
	Logger *slog.Logger
}

func (c DirConfig) withDefaults() DirConfig {
	if c.Domain == "" {
		c.Domain = "localhost"
	}
	if c.URLs == nil {
		c.URLs = func(s Site) []string { return URLs(s, c.Port, c.Domain) }
	}
	if c.LiveURL == nil {
		c.LiveURL = func(p string) string { return LiveURL(p, c.Port, c.Domain) }
	}
	if c.Keep == 0 {
		c.Keep = 3
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c DirConfig) validate() error {
	switch {
	case c.Root == "":
		return errors.New("preview dir: Root is required: the directory to keep previews in")
	case c.Keep < 1:
		return fmt.Errorf("preview dir: Keep is %d: keep at least 1 version per thread", c.Keep)
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("preview dir: Port %d is out of range 0-65535", c.Port)
	}
	return nil
}

// Dir is the Target that publishes into a local directory tree (see the package doc for the
// layout). One Dir per root: deploys are serialized within a process, not across processes;
// their switches are, by a flock per project, so a Fence holds across processes too.
type Dir struct {
	cfg    DirConfig
	layout layout
	cache  *manifestCache

	mu    sync.Mutex
	locks map[string]chan struct{} // per thread and per project; never shrinks
}

var _ Target = (*Dir)(nil)

// NewDir validates cfg and creates its root.
func NewDir(cfg DirConfig) (*Dir, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Root, 0o755); err != nil {
		return nil, fmt.Errorf("preview dir: %w", err)
	}
	return &Dir{
		cfg:    cfg,
		layout: layout{root: cfg.Root},
		cache:  newManifestCache(64),
		locks:  map[string]chan struct{}{},
	}, nil
}

// Deploy implements Target. It stores the files not stored yet, writes the new version's
// manifest and switches to it by renaming a symlink, first the thread's, then the project's
// latest; each switch is atomic on its own. Deploys of different threads run concurrently
// and switch one at a time.
func (d *Dir) Deploy(ctx context.Context, site Site, dir string) (Deployment, error) {
	return d.deployLocked(ctx, site, dir, true)
}

var _ Baselines = (*Dir)(nil)

// DeployBaseline implements Baselines: Deploy without switching the project's latest.
func (d *Dir) DeployBaseline(ctx context.Context, site Site, dir string) (Deployment, error) {
	return d.deployLocked(ctx, site, dir, false)
}

// deployLocked deploys under the thread's lock; without latest (a baseline) the project's
// latest stays and the deployment names the thread's URL only.
func (d *Dir) deployLocked(ctx context.Context, site Site, dir string, latest bool) (Deployment, error) {
	start := time.Now()
	if err := site.Validate(); err != nil {
		return Deployment{}, err
	}
	unlock, err := d.lock(ctx, "thread "+site.String())
	if err != nil {
		return Deployment{}, err
	}
	defer unlock()
	dep, err := d.deploy(ctx, site, dir, latest)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return Deployment{}, ctxErr
		}
		return Deployment{}, fmt.Errorf("%s %s: %w", deployWhat(latest), site, err)
	}
	if !latest {
		dep.URLs = dep.URLs[:min(1, len(dep.URLs))]
	}
	dep.Duration = time.Since(start)
	d.logDeploy(ctx, site, dep)
	return dep, nil
}

// deployWhat names a deployment in errors: a preview, or (without latest) a baseline.
func deployWhat(latest bool) string {
	if latest {
		return "deploy preview"
	}
	return "deploy the baseline of"
}

// deploy runs the steps of one deploy, switching the project's latest too when latest is
// set; the caller holds the thread's lock.
func (d *Dir) deploy(ctx context.Context, site Site, dir string, latest bool) (Deployment, error) {
	m, dep, err := d.build(ctx, site, dir)
	if err != nil {
		return Deployment{}, err
	}
	prev, prevID := d.previous(ctx, site)
	dep.Deleted, dep.Previous = countMissing(prev, m), Ref{Thread: site.Thread, Version: prevID}
	if prevID == "" {
		dep.Previous = d.latestRef(site.Project)
	}
	n, err := d.commit(site, m)
	if err != nil {
		return Deployment{}, err
	}
	if err := d.publish(ctx, site, n, latest); err != nil {
		return Deployment{}, err
	}
	d.prune(ctx, site)
	dep.Version = strconv.Itoa(n)
	dep.URLs = d.cfg.URLs(site)
	return dep, nil
}

// build stores the files of the source directory dir in the thread's blob store, linking
// what the project's latest version (if another thread's) already stored.
func (d *Dir) build(ctx context.Context, site Site, dir string) (manifest, Deployment, error) {
	root, err := sourceRoot(dir)
	if err != nil {
		return manifest{}, Deployment{}, err
	}
	b := builder{blobs: d.layout.blobs(site), donor: d.donor(site)}
	return b.run(ctx, root)
}

// donor returns the blob store of the thread the project's latest shows, if not site's own.
func (d *Dir) donor(site Site) string {
	target, err := resolveLink(d.layout.latest(site.Project))
	if err != nil || threadDirOf(target) == d.layout.thread(site) {
		return ""
	}
	return filepath.Join(threadDirOf(target), blobsDir)
}

// previous returns the live manifest of site and its version id; empty if there is none or
// it is unreadable.
func (d *Dir) previous(ctx context.Context, site Site) (manifest, string) {
	target, err := resolveLink(d.layout.current(site))
	if err == nil {
		var m manifest
		if m, err = d.cache.load(target); err == nil {
			n, _ := versionOf(target)
			return m, strconv.Itoa(n)
		}
	}
	if !errors.Is(err, fs.ErrNotExist) {
		d.cfg.Logger.WarnContext(ctx, "preview: ignoring unreadable live version", siteAttrs(site), slog.Any("error", err))
	}
	return manifest{}, ""
}

// latestRef names the version the project's latest shows; zero if none.
func (d *Dir) latestRef(project string) Ref {
	target, err := resolveLink(d.layout.latest(project))
	if err != nil {
		return Ref{}
	}
	n, ok := versionOf(target)
	if !ok {
		return Ref{}
	}
	return Ref{Thread: filepath.Base(threadDirOf(target)), Version: strconv.Itoa(n)}
}

// countMissing counts the files of prev absent from next.
func countMissing(prev, next manifest) int {
	n := 0
	for p := range prev.Files {
		if _, ok := next.Files[p]; !ok {
			n++
		}
	}
	return n
}

// commit writes m as the next version of site and returns its number.
func (d *Dir) commit(site Site, m manifest) (int, error) {
	n, err := d.nextVersion(site)
	if err != nil {
		return 0, err
	}
	path := d.layout.manifest(site, n)
	if err := m.write(path); err != nil {
		return 0, err
	}
	if fi, err := os.Stat(path); err == nil {
		d.cache.put(path, fi, m)
	}
	return n, nil
}

// nextVersion returns a version number above every one present, finished or not.
func (d *Dir) nextVersion(site Site) (int, error) {
	dir := d.layout.versions(site)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	top := 0
	for _, e := range entries {
		prefix, _, _ := strings.Cut(e.Name(), ".")
		if n, err := strconv.Atoi(prefix); err == nil {
			top = max(top, n)
		}
	}
	return top + 1, nil
}

// publish switches the thread's current and the project's latest to version n. Switches are
// serialized per project so latest always ends on the last version published: within the
// process by the project's lock, across processes by a flock on <project>/.switch.lock, under
// which ctx's fence is checked against each pointer's fences and stored beside it before the
// rename. A refused deploy switches nothing.
func (d *Dir) publish(ctx context.Context, site Site, n int, latest bool) (err error) {
	unlock, err := d.lock(ctx, "project "+site.Project)
	if err != nil {
		os.Remove(d.layout.manifest(site, n))
		return err
	}
	defer unlock()
	unlockFile, err := lockFile(filepath.Join(d.cfg.Root, site.Project, switchLockName))
	if err != nil {
		os.Remove(d.layout.manifest(site, n))
		return err
	}
	defer unlockFile()
	links := []string{d.layout.current(site)}
	if latest {
		links = append(links, d.layout.latest(site.Project))
	}
	f := FenceOf(ctx)
	if err := admitLinks(links, f); err != nil {
		os.Remove(d.layout.manifest(site, n))
		return err
	}
	if err := switchLink(links[0], currentTarget(n), f); err != nil {
		os.Remove(d.layout.manifest(site, n))
		return err
	}
	if !latest {
		return nil
	}
	if err := switchLink(links[1], latestTarget(site, n), f); err != nil {
		return fmt.Errorf("thread preview is live but the project's latest was not switched: %w", err)
	}
	return nil
}

// admitLinks checks fence f against the fences stored beside each of links.
func admitLinks(links []string, f *Fence) error {
	if f == nil {
		return nil
	}
	for _, link := range links {
		stored, err := readFences(link)
		if err == nil {
			err = stored.Admit(f, "preview pointer "+filepath.Base(filepath.Dir(link))+"/"+filepath.Base(link))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// switchLink stores f in link's fences, then points link at target; the caller holds the
// project's switch lock and has admitted f.
func switchLink(link, target string, f *Fence) error {
	if f != nil {
		stored, err := readFences(link)
		if err == nil {
			err = writeFences(link, stored.With(f))
		}
		if err != nil {
			return err
		}
	}
	return swapLink(link, target)
}

// lock takes the named lock, waiting at most until ctx ends.
func (d *Dir) lock(ctx context.Context, key string) (unlock func(), err error) {
	d.mu.Lock()
	ch, ok := d.locks[key]
	if !ok {
		ch = make(chan struct{}, 1)
		d.locks[key] = ch
	}
	d.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (d *Dir) logDeploy(ctx context.Context, site Site, dep Deployment) {
	d.cfg.Logger.InfoContext(ctx, "preview deployed", siteAttrs(site),
		slog.String("version", dep.Version), slog.Int("written", dep.Written),
		slog.Int("unchanged", dep.Unchanged), slog.Int("deleted", dep.Deleted),
		slog.Int64("bytes", dep.Bytes), slog.Duration("duration", dep.Duration))
}

func siteAttrs(s Site) slog.Attr {
	return slog.Group("site", slog.String("project", s.Project), slog.String("thread", s.Thread))
}

var _ Production = (*Dir)(nil)

// DeployProduction implements Production: the project's live site is kept like a thread's
// versions, in <root>/<project>/threads/_live (never a valid thread name), and switched by
// renaming its current symlink; the project's latest preview is left alone.
func (d *Dir) DeployProduction(ctx context.Context, project, dir string) (Deployment, error) {
	start := time.Now()
	if err := tenant.ValidatePart("project", project); err != nil {
		return Deployment{}, err
	}
	site := Site{Project: project, Thread: liveSlot}
	unlock, err := d.lock(ctx, "thread "+site.String())
	if err != nil {
		return Deployment{}, err
	}
	defer unlock()
	dep, err := d.deploy(ctx, site, dir, false)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return Deployment{}, ctxErr
		}
		return Deployment{}, fmt.Errorf("deploy %s live: %w", project, err)
	}
	dep.URLs, dep.Duration = []string{d.cfg.LiveURL(project)}, time.Since(start)
	d.logDeploy(ctx, site, dep)
	return dep, nil
}
