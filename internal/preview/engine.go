package preview

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// The engine layout: previews live in the engine, so any serve can read what any worker
// deployed, with no shared directory.
//
//	blob store "previews"  sha256/<hex>      one file's content (content-addressed, shared by all sites)
//	                       manifest/<hex>    a version's manifest (JSON), named by its own sha256
//	table "previews"       <project>.<thread> the thread's pointer: live version number and manifest, the kept ones, fences
//	                       <project>          the project's latest: thread, version, manifest, fences
//
// A deploy uploads the blobs the engine lacks, then the manifest, then switches the thread's
// pointer by compare-and-set (the version switch is atomic: one KV write), then the latest,
// by compare-and-set too. Each switch checks the deploy's Fence against the pointer's fences
// and stores it there, in that one write.
const (
	// EngineStore is the name of the blob store and of the table that hold previews.
	EngineStore = "previews"
	// engineKeep is how many versions a thread pointer remembers for Versions.
	engineKeep = 3
)

// EngineConfig configures an Engine target.
type EngineConfig struct {
	// Backend is the engine (its Blobs and Table). Required.
	Backend *broker.Backend
	// CacheDir keeps blobs read back (Versions); content-addressed, so any process may share
	// it. Required.
	CacheDir string
	// CacheMax bounds CacheDir in bytes: past it, the blobs used least recently are removed
	// (fetched again when asked for). Default DefaultCacheMax.
	CacheMax int64
	// Domain, Port and URLs report addresses as in DirConfig.
	Domain string
	Port   int
	URLs   func(Site) []string
	// LiveURL, when set, replaces LiveURL(project, Port, Domain) for production deploys.
	LiveURL func(project string) string
	// Logger receives one line per deploy. Default: discard.
	Logger *slog.Logger
}

// Engine is the Target that publishes into the engine's blob store: content-addressed blobs,
// a manifest per version and a KV pointer per thread and per project. An EngineServer on any
// machine serves what it deploys. Deploys of one thread are serialized in a process; across
// processes the pointer's compare-and-set keeps version numbers unique.
type Engine struct {
	cfg      EngineConfig
	blobs    broker.Blobs
	pointers broker.Table
	cache    *blobCache

	mu    sync.Mutex
	locks map[string]chan struct{}
}

var (
	_ Target   = (*Engine)(nil)
	_ Versions = (*Engine)(nil)
)

// NewEngine opens the engine's preview store.
func NewEngine(ctx context.Context, cfg EngineConfig) (*Engine, error) {
	cfg.Domain = strings.Trim(strings.ToLower(cfg.Domain), ".") // as EngineServer reads hosts
	if cfg.Domain == "" {
		cfg.Domain = "localhost"
	}
	if cfg.URLs == nil {
		cfg.URLs = func(s Site) []string { return URLs(s, cfg.Port, cfg.Domain) }
	}
	if cfg.LiveURL == nil {
		cfg.LiveURL = func(p string) string { return LiveURL(p, cfg.Port, cfg.Domain) }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	blobs, pointers, err := openEngineStore(ctx, cfg.Backend)
	if err != nil {
		return nil, err
	}
	cache, err := newBlobCache(cfg.CacheDir, blobs, cfg.CacheMax)
	if err != nil {
		return nil, err
	}
	return &Engine{cfg: cfg, blobs: blobs, pointers: pointers, cache: cache, locks: map[string]chan struct{}{}}, nil
}

func openEngineStore(ctx context.Context, b *broker.Backend) (broker.Blobs, broker.Table, error) {
	if b == nil || b.Blobs == nil || b.Table == nil {
		return nil, nil, errors.New("preview engine: the engine has no blob store")
	}
	blobs, err := b.Blobs(ctx, EngineStore)
	if err != nil {
		return nil, nil, fmt.Errorf("preview engine: %w", err)
	}
	pointers, err := b.Table(ctx, EngineStore)
	if err != nil {
		return nil, nil, fmt.Errorf("preview engine: %w", err)
	}
	return blobs, pointers, nil
}

// threadPointer is a thread's live version and the versions it keeps (newest last).
type threadPointer struct {
	Version  int           `json:"version"`
	Manifest string        `json:"manifest"`
	Kept     []keptVersion `json:"kept,omitempty"`
	Fences   Fences        `json:"fences,omitempty"` // per lease holder, the newest token that switched it
}

type keptVersion struct {
	Version  int    `json:"version"`
	Manifest string `json:"manifest"`
}

// latestPointer is what a project's latest URL shows.
type latestPointer struct {
	Thread   string `json:"thread"`
	Version  int    `json:"version"`
	Manifest string `json:"manifest"`
	Fences   Fences `json:"fences,omitempty"`
}

func threadKey(s Site) string { return s.Project + "." + s.Thread }

// Deploy implements Target.
func (e *Engine) Deploy(ctx context.Context, site Site, dir string) (Deployment, error) {
	return e.deployLocked(ctx, site, dir, true)
}

// deployLocked deploys under the thread's lock; without latest (a baseline) the project's
// latest stays and the deployment names the thread's URL only.
func (e *Engine) deployLocked(ctx context.Context, site Site, dir string, latest bool) (Deployment, error) {
	start := time.Now()
	if err := site.Validate(); err != nil {
		return Deployment{}, err
	}
	unlock, err := e.lock(ctx, threadKey(site))
	if err != nil {
		return Deployment{}, err
	}
	defer unlock()
	dep, err := e.deploy(ctx, site, dir, latest)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return Deployment{}, ctxErr
		}
		return Deployment{}, fmt.Errorf("%s %s: %w", deployWhat(latest), site, err)
	}
	what := "preview deployed to the engine"
	if !latest {
		urls := e.cfg.URLs(site)
		dep.URLs, what = urls[:min(1, len(urls))], "baseline deployed to the engine"
	}
	dep.Duration = time.Since(start)
	e.cfg.Logger.InfoContext(ctx, what, siteAttrs(site), slog.String("version", dep.Version),
		slog.Int("written", dep.Written), slog.Int("unchanged", dep.Unchanged), slog.Int64("bytes", dep.Bytes),
		slog.Duration("duration", dep.Duration))
	return dep, nil
}

// deploy uploads dir as site's next version and switches the thread's pointer to it, then,
// with latest, the project's latest.
func (e *Engine) deploy(ctx context.Context, site Site, dir string, latest bool) (Deployment, error) {
	prev, _, err := e.thread(ctx, site)
	if err != nil {
		return Deployment{}, err
	}
	prevMan, err := e.manifestOf(ctx, prev.Manifest)
	if err != nil {
		return Deployment{}, err
	}
	m, dep, err := e.upload(ctx, dir, prevMan)
	if err != nil {
		return Deployment{}, err
	}
	dep.Deleted, dep.Previous = countMissing(prevMan, m), Ref{Thread: site.Thread, Version: versionID(prev.Version)}
	if prev.Version == 0 && latest {
		dep.Previous = e.latestRef(ctx, site.Project)
	}
	sum, err := e.putManifest(ctx, m)
	if err != nil {
		return Deployment{}, err
	}
	if err := ctx.Err(); err != nil {
		return Deployment{}, err // nothing switched: the previous version stays live
	}
	if latest {
		if err := e.admitLatest(ctx, site.Project); err != nil {
			return Deployment{}, err
		}
	}
	n, err := e.switchThread(ctx, site, sum)
	if err != nil {
		return Deployment{}, err
	}
	if !latest {
		return Deployment{Version: strconv.Itoa(n), Written: dep.Written, Unchanged: dep.Unchanged, Deleted: dep.Deleted,
			Bytes: dep.Bytes, Previous: dep.Previous}, nil
	}
	if err := e.switchLatest(ctx, site, n, sum); err != nil {
		return Deployment{}, fmt.Errorf("thread preview is live but the project's latest was not switched: %w", err)
	}
	dep.Version, dep.URLs = strconv.Itoa(n), e.cfg.URLs(site)
	return dep, nil
}

var _ Baselines = (*Engine)(nil)

// DeployBaseline implements Baselines: Deploy without switching the project's latest.
func (e *Engine) DeployBaseline(ctx context.Context, site Site, dir string) (Deployment, error) {
	return e.deployLocked(ctx, site, dir, false)
}

var _ Production = (*Engine)(nil)

// DeployProduction implements Production: the project's live site is kept like a thread's
// versions, under the pointer <project>._live (never a valid thread name), and switched by
// one compare-and-set write; the project's latest preview is left alone.
func (e *Engine) DeployProduction(ctx context.Context, project, dir string) (Deployment, error) {
	start := time.Now()
	if err := tenant.ValidatePart("project", project); err != nil {
		return Deployment{}, err
	}
	site := Site{Project: project, Thread: liveSlot}
	unlock, err := e.lock(ctx, threadKey(site))
	if err != nil {
		return Deployment{}, err
	}
	defer unlock()
	dep, err := e.deploy(ctx, site, dir, false)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return Deployment{}, ctxErr
		}
		return Deployment{}, fmt.Errorf("deploy %s live: %w", project, err)
	}
	dep.URLs, dep.Duration = []string{e.cfg.LiveURL(project)}, time.Since(start)
	e.cfg.Logger.InfoContext(ctx, "live site deployed to the engine", siteAttrs(site), slog.String("version", dep.Version),
		slog.Int("written", dep.Written), slog.Int("unchanged", dep.Unchanged), slog.Duration("duration", dep.Duration))
	return dep, nil
}

var _ LiveVersions = (*Engine)(nil)

// LiveVersion implements LiveVersions.
func (e *Engine) LiveVersion(ctx context.Context, project string) (*Version, error) {
	if err := tenant.ValidatePart("project", project); err != nil {
		return nil, err
	}
	p, _, err := e.thread(ctx, Site{Project: project, Thread: liveSlot})
	if err != nil {
		return nil, err
	}
	if p.Version == 0 {
		return nil, fmt.Errorf("%w: %s has no live site", ErrNoVersion, project)
	}
	m, err := e.manifestOf(ctx, p.Manifest)
	if err != nil {
		return nil, err
	}
	return &Version{v: version{man: m, blobs: e.cache.open, thread: liveSlot, id: strconv.Itoa(p.Version)}}, nil
}

func versionID(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// thread reads site's pointer; zero (and revision 0) when the thread has none.
func (e *Engine) thread(ctx context.Context, site Site) (threadPointer, uint64, error) {
	var p threadPointer
	raw, rev, err := e.pointers.Get(ctx, threadKey(site))
	if errors.Is(err, broker.ErrNotFound) {
		return p, 0, nil
	}
	if err != nil {
		return p, 0, err
	}
	return p, rev, json.Unmarshal(raw, &p)
}

// latest reads project's latest pointer; zero (and revision 0) when it has none.
func (e *Engine) latest(ctx context.Context, project string) (latestPointer, uint64, error) {
	var l latestPointer
	raw, rev, err := e.pointers.Get(ctx, project)
	if errors.Is(err, broker.ErrNotFound) {
		return l, 0, nil
	}
	if err != nil {
		return l, 0, err
	}
	return l, rev, json.Unmarshal(raw, &l)
}

// admitLatest refuses, before anything is switched, a fenced deploy that the project's latest
// would refuse (switchLatest checks again in its compare-and-set). Unfenced, it reads nothing.
func (e *Engine) admitLatest(ctx context.Context, project string) error {
	f := FenceOf(ctx)
	if f == nil {
		return nil
	}
	l, _, err := e.latest(ctx, project)
	if err != nil {
		return err
	}
	return l.Fences.Admit(f, "the project's latest preview")
}

func (e *Engine) latestRef(ctx context.Context, project string) Ref {
	l, rev, err := e.latest(ctx, project)
	if err != nil || rev == 0 {
		return Ref{}
	}
	return Ref{Thread: l.Thread, Version: versionID(l.Version)}
}

// manifestOf loads the manifest named sum; empty for "".
func (e *Engine) manifestOf(ctx context.Context, sum string) (manifest, error) {
	if sum == "" {
		return manifest{}, nil
	}
	return loadEngineManifest(ctx, e.blobs, sum)
}

func loadEngineManifest(ctx context.Context, blobs broker.Blobs, sum string) (manifest, error) {
	raw, _, err := blobs.Get(ctx, "manifest/"+sum)
	if err != nil {
		return manifest{}, fmt.Errorf("manifest %s: %w", sum, err)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return manifest{}, fmt.Errorf("manifest %s: %w", sum, err)
	}
	return m, m.check(sum)
}

func (e *Engine) putManifest(ctx context.Context, m manifest) (string, error) {
	raw, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(raw)
	sum := hex.EncodeToString(h[:])
	_, err = e.blobs.Put(ctx, "manifest/"+sum, raw)
	return sum, err
}

// switchThread makes the manifest sum the thread's live version, numbered one above the
// pointer it replaces (compare-and-set; re-read on a concurrent switch elsewhere). ctx's fence
// is checked against the pointer read and stored in the pointer written, so the check and
// the switch are one compare-and-set.
func (e *Engine) switchThread(ctx context.Context, site Site, sum string) (int, error) {
	f := FenceOf(ctx)
	for range 10 {
		cur, rev, err := e.thread(ctx, site)
		if err != nil {
			return 0, err
		}
		if err := cur.Fences.Admit(f, "the thread's preview"); err != nil {
			return 0, err
		}
		next := threadPointer{Version: cur.Version + 1, Manifest: sum, Fences: cur.Fences.With(f),
			Kept: append(cur.Kept, keptVersion{Version: cur.Version + 1, Manifest: sum})}
		next.Kept = next.Kept[max(0, len(next.Kept)-engineKeep):]
		raw, _ := json.Marshal(next)
		if rev == 0 {
			_, err = e.pointers.Create(ctx, threadKey(site), raw)
		} else {
			_, err = e.pointers.Update(ctx, threadKey(site), raw, rev)
		}
		if errors.Is(err, broker.ErrConflict) || errors.Is(err, broker.ErrExists) {
			continue
		}
		return next.Version, err
	}
	return 0, errors.New("the thread's preview pointer kept changing; deploy again")
}

// switchLatest makes version n of site (manifest sum) the project's latest: a
// compare-and-set on the pointer read, ctx's fence checked against it and stored in it.
func (e *Engine) switchLatest(ctx context.Context, site Site, n int, sum string) error {
	unlock, err := e.lock(ctx, "project "+site.Project)
	if err != nil {
		return err
	}
	defer unlock()
	f := FenceOf(ctx)
	for range 10 {
		cur, rev, err := e.latest(ctx, site.Project)
		if err != nil {
			return err
		}
		if err := cur.Fences.Admit(f, "the project's latest preview"); err != nil {
			return err
		}
		raw, _ := json.Marshal(latestPointer{Thread: site.Thread, Version: n, Manifest: sum, Fences: cur.Fences.With(f)})
		if rev == 0 {
			_, err = e.pointers.Create(ctx, site.Project, raw)
		} else {
			_, err = e.pointers.Update(ctx, site.Project, raw, rev)
		}
		if !errors.Is(err, broker.ErrConflict) && !errors.Is(err, broker.ErrExists) {
			return err
		}
	}
	return errors.New("the project's latest preview pointer kept changing; deploy again")
}

// upload stores the files of the tree at dir the engine does not hold yet.
func (e *Engine) upload(ctx context.Context, dir string, prev manifest) (manifest, Deployment, error) {
	root, err := sourceRoot(dir)
	if err != nil {
		return manifest{}, Deployment{}, err
	}
	top, err := os.OpenRoot(root)
	if err != nil {
		return manifest{}, Deployment{}, err
	}
	defer top.Close()
	known := make(map[string]bool, len(prev.Files))
	for _, f := range prev.Files {
		known[f.SHA256] = true
	}
	u := &uploader{e: e, ctx: ctx, known: known}
	if err := walkTree(ctx, top, min(2*runtime.GOMAXPROCS(0), 16), u.place); err != nil {
		return manifest{}, Deployment{}, err
	}
	b := builder{done: u.done}
	m, dep := b.tally()
	return m, dep, nil
}

type uploader struct {
	e     *Engine
	ctx   context.Context
	known map[string]bool // hashes the previous version holds: stored already; read-only

	mu   sync.Mutex
	done []placed
}

// place hashes one file and uploads it unless the engine holds its content.
func (u *uploader) place(f srcFile) error {
	e, err := hashSource(f)
	if err != nil {
		return err
	}
	kept := u.known[e.SHA256]
	if !kept {
		_, err := u.e.blobs.Version(u.ctx, "sha256/"+e.SHA256)
		kept = err == nil
	}
	if !kept {
		if e, err = u.store(f); err != nil {
			return err
		}
	}
	u.mu.Lock()
	u.done = append(u.done, placed{rel: f.rel, entry: e, kept: kept})
	u.mu.Unlock()
	return nil
}

// store uploads a file's content, named by the hash of what was read.
func (u *uploader) store(f srcFile) (entry, error) {
	in, size, err := f.open()
	if err != nil {
		return entry{}, err
	}
	defer in.Close()
	if size > broker.MaxBlobSize {
		return entry{}, fmt.Errorf("%s is %d MiB; previews take files up to %d MiB", f.rel, size>>20, broker.MaxBlobSize>>20)
	}
	data, err := io.ReadAll(io.LimitReader(in, broker.MaxBlobSize+1))
	if err != nil {
		return entry{}, fmt.Errorf("read %s: %w", f.rel, err)
	}
	h := sha256.Sum256(data)
	e := entry{SHA256: hex.EncodeToString(h[:]), Size: int64(len(data))}
	if _, err := u.e.blobs.Put(u.ctx, "sha256/"+e.SHA256, data); err != nil {
		return entry{}, fmt.Errorf("store %s: %w", f.rel, err)
	}
	return e, nil
}

// lock takes the named in-process lock, waiting at most until ctx ends.
func (e *Engine) lock(ctx context.Context, key string) (func(), error) {
	e.mu.Lock()
	ch, ok := e.locks[key]
	if !ok {
		ch = make(chan struct{}, 1)
		e.locks[key] = ch
	}
	e.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Version implements Versions: a version the thread pointer still keeps.
func (e *Engine) Version(ctx context.Context, site Site, id string) (*Version, error) {
	if err := site.Validate(); err != nil {
		return nil, err
	}
	p, _, err := e.thread(ctx, site)
	if err != nil {
		return nil, err
	}
	for _, k := range p.Kept {
		if strconv.Itoa(k.Version) == id {
			m, err := e.manifestOf(ctx, k.Manifest)
			if err != nil {
				return nil, err
			}
			return &Version{v: version{man: m, blobs: e.cache.open, thread: site.Thread, id: id}}, nil
		}
	}
	return nil, fmt.Errorf("%w: version %s of %s", ErrNoVersion, id, site)
}
