package s3target

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/webordinary/webordinary/internal/preview"
	"github.com/webordinary/webordinary/internal/tenant"
)

// Defaults.
const (
	// DefaultKeep is how many versions of each thread or host keep their manifest.
	DefaultKeep = 3
	// DefaultWorkers is how many files a deploy hashes and uploads at once.
	DefaultWorkers = 16
)

// Config configures a Store.
type Config struct {
	// Client is the S3 client (its endpoint, region and credentials). Required.
	Client *s3.Client
	// Bucket holds previews and production sites. Required; it must exist
	// (`webordinary aws setup` or deploy/aws create it).
	Bucket string
	// Prefix is put before every key (such as "site/"); default none.
	Prefix string
	// Domain is the host suffix in reported preview URLs and in the Hosts Server answers.
	// Default "localhost".
	Domain string
	// Port is the preview server's port in reported URLs; 0 leaves it out.
	Port int
	// URLs, when set, replaces preview.URLs(site, Port, Domain) in each preview Deployment.
	URLs func(preview.Site) []string
	// LiveURL, when set, replaces preview.LiveURL(project, Port, Domain) for DeployProduction.
	LiveURL func(project string) string
	// Keep is how many manifests of each thread (or production host) survive pruning, the
	// live one included. Default 3. Blobs are not collected (see ARCHITECTURE: "Previews on S3").
	Keep int
	// Workers bounds concurrent hashing and uploads per deploy. Default 16.
	Workers int
	// Logger receives one line per deploy and pruning failures. Default: discard.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	c.Domain = strings.Trim(strings.ToLower(c.Domain), ".")
	if c.Domain == "" {
		c.Domain = "localhost"
	}
	if c.URLs == nil {
		c.URLs = func(s preview.Site) []string { return preview.URLs(s, c.Port, c.Domain) }
	}
	if c.LiveURL == nil {
		c.LiveURL = func(p string) string { return preview.LiveURL(p, c.Port, c.Domain) }
	}
	c.Keep = cmp.Or(c.Keep, DefaultKeep)
	c.Workers = cmp.Or(c.Workers, DefaultWorkers)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Client == nil:
		return errors.New("s3target: Client is required")
	case c.Bucket == "":
		return errors.New("s3target: Bucket is required: the bucket previews are published to")
	case c.Keep < 1:
		return fmt.Errorf("s3target: Keep is %d: keep at least 1 version", c.Keep)
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("s3target: Port %d is out of range 0-65535", c.Port)
	}
	return nil
}

// Store publishes previews (it is a preview.Target) and production sites into one bucket.
// Safe for concurrent use.
type Store struct {
	cfg       Config
	manifests *manifestCache

	mu    sync.Mutex
	locks map[string]chan struct{} // per line (thread or host); never shrinks
}

var (
	_ preview.Target     = (*Store)(nil)
	_ preview.Production = (*Store)(nil)
)

// New validates cfg. It does not touch the bucket.
func New(cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Store{cfg: cfg, manifests: newManifestCache(256), locks: map[string]chan struct{}{}}, nil
}

// Deploy implements preview.Target: dir becomes site.Thread's preview, then site.Project's
// latest. It returns ctx.Err() unwrapped when ctx ends; the previous version stays live.
func (s *Store) Deploy(ctx context.Context, site preview.Site, dir string) (preview.Deployment, error) {
	if err := site.Validate(); err != nil {
		return preview.Deployment{}, err
	}
	l := s.threadLine(site)
	dep, err := s.deploy(ctx, l, dir)
	if err != nil {
		return dep, err
	}
	dep.URLs = s.cfg.URLs(site)
	return dep, nil
}

var _ preview.Baselines = (*Store)(nil)

// DeployBaseline implements preview.Baselines: Deploy without switching the project's latest.
func (s *Store) DeployBaseline(ctx context.Context, site preview.Site, dir string) (preview.Deployment, error) {
	if err := site.Validate(); err != nil {
		return preview.Deployment{}, err
	}
	l := s.threadLine(site)
	l.pointers = l.pointers[:1]
	dep, err := s.deploy(ctx, l, dir)
	if err != nil {
		return dep, err
	}
	urls := s.cfg.URLs(site)
	dep.URLs = urls[:min(1, len(urls))]
	return dep, nil
}

// hostPattern is a lowercase DNS name with at least two labels.
var hostPattern = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ErrInvalidHost is returned by Publish for a host that is not a lowercase DNS name.
var ErrInvalidHost = errors.New("invalid production host")

// Publish makes dir the production site served at host (such as "www.example.com"), with the
// same guarantees as Deploy. The Deployment's URL is https://<host>/.
func (s *Store) Publish(ctx context.Context, host, dir string) (preview.Deployment, error) {
	if !hostPattern.MatchString(host) || len(host) > 253 {
		return preview.Deployment{}, fmt.Errorf("%w %q: use a lowercase DNS name such as www.example.com", ErrInvalidHost, host)
	}
	dep, err := s.deploy(ctx, s.hostLine(host), dir)
	if err != nil {
		return dep, err
	}
	dep.URLs = []string{"https://" + host + "/"}
	return dep, nil
}

// DeployProduction implements preview.Production: dir becomes project's live site, served at
// <project>.<Domain> from its own pointer (previews/<project>/live/current); the project's
// previews and its latest are not touched. The Deployment's only URL is the live URL.
func (s *Store) DeployProduction(ctx context.Context, project, dir string) (preview.Deployment, error) {
	if err := tenant.ValidatePart("project", project); err != nil {
		return preview.Deployment{}, err
	}
	dep, err := s.deploy(ctx, s.liveLine(project), dir)
	if err != nil {
		return dep, err
	}
	dep.URLs = []string{s.cfg.LiveURL(project)}
	return dep, nil
}

// deploy publishes dir on line l: upload, manifest, pointers, prune.
func (s *Store) deploy(ctx context.Context, l line, dir string) (preview.Deployment, error) {
	start := time.Now()
	if err := ctx.Err(); err != nil {
		return preview.Deployment{}, err
	}
	unlock, err := s.lock(ctx, l.versions)
	if err != nil {
		return preview.Deployment{}, err
	}
	defer unlock()
	dep, err := s.steps(ctx, l, dir)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return preview.Deployment{}, ctxErr
		}
		return preview.Deployment{}, fmt.Errorf("deploy %s: %w", l.name, err)
	}
	dep.Duration = time.Since(start)
	s.cfg.Logger.InfoContext(ctx, "s3 deployed", slog.String("site", l.name), slog.String("version", dep.Version),
		slog.Int("written", dep.Written), slog.Int("unchanged", dep.Unchanged), slog.Int("deleted", dep.Deleted),
		slog.Int64("bytes", dep.Bytes), slog.Duration("duration", dep.Duration))
	return dep, nil
}

// steps runs one deploy; the caller holds the line's lock.
func (s *Store) steps(ctx context.Context, l line, dir string) (preview.Deployment, error) {
	cur, err := s.readPointer(ctx, l.pointers[0])
	if err != nil {
		return preview.Deployment{}, err
	}
	prev := s.liveManifest(ctx, cur)
	known := s.knownBlobs(ctx, l, prev)
	m, dep, err := s.upload(ctx, l, dir, known)
	if err != nil {
		return preview.Deployment{}, err
	}
	dep.Deleted, dep.Previous = countMissing(prev, m), s.previous(ctx, l, cur)
	key, n, err := s.writeManifest(ctx, l, m, cur.version+1)
	if err != nil {
		return preview.Deployment{}, err
	}
	if err := s.switchPointers(ctx, l, key, n, cur); err != nil {
		return preview.Deployment{}, err
	}
	s.prune(ctx, l, n)
	dep.Version = fmt.Sprint(n)
	return dep, nil
}

// liveManifest returns the manifest a pointer names, or an empty one.
func (s *Store) liveManifest(ctx context.Context, p pointer) preview.Manifest {
	if p.target == "" {
		return preview.Manifest{}
	}
	m, err := s.manifest(ctx, p.target)
	if err != nil {
		s.cfg.Logger.WarnContext(ctx, "s3target: ignoring unreadable live version", slog.String("manifest", p.target), slog.Any("error", err))
		return preview.Manifest{}
	}
	return m
}

// previous is what the owner saw before a deploy on l: its live version, else (a thread's
// first deploy) the project's latest. Zero for production lines and new projects.
func (s *Store) previous(ctx context.Context, l line, cur pointer) preview.Ref {
	if l.thread == "" {
		return preview.Ref{}
	}
	if cur.target != "" {
		return preview.Ref{Thread: l.thread, Version: strconv.Itoa(cur.version)}
	}
	if p, err := s.readPointer(ctx, l.pointers[len(l.pointers)-1]); err == nil && p.target != "" {
		return preview.Ref{Thread: threadOf(p.target), Version: strconv.Itoa(p.version)}
	}
	return preview.Ref{}
}

// knownBlobs is the content the line's live version and the other pointers' versions (the
// project's latest) hold: blobs that certainly exist and need no upload.
func (s *Store) knownBlobs(ctx context.Context, l line, prev preview.Manifest) map[string]int64 {
	known := map[string]int64{}
	add := func(m preview.Manifest) {
		for _, e := range m.Files {
			known[e.SHA256] = e.Size
		}
	}
	add(prev)
	for _, key := range l.donors {
		if p, err := s.readPointer(ctx, key); err == nil && p.target != "" && strings.HasPrefix(p.target, l.blobScope) {
			add(s.liveManifest(ctx, p))
		}
	}
	return known
}

func countMissing(prev, next preview.Manifest) int {
	n := 0
	for p := range prev.Files {
		if _, ok := next.Files[p]; !ok {
			n++
		}
	}
	return n
}

// lock takes the named in-process lock, waiting at most until ctx ends.
func (s *Store) lock(ctx context.Context, key string) (unlock func(), err error) {
	s.mu.Lock()
	ch, ok := s.locks[key]
	if !ok {
		ch = make(chan struct{}, 1)
		s.locks[key] = ch
	}
	s.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// line is where one site's versions live: a thread's preview, a project's live site or a
// production host.
type line struct {
	name      string   // for logs and errors
	thread    string   // the preview thread; "" for live sites and hosts
	donors    []string // pointers whose versions' blobs a deploy may reuse without upload
	blobScope string   // key prefix shared by the manifests whose blobs this line may reuse
	blobs     string   // key prefix of blobs
	versions  string   // key prefix of manifests
	pointers  []string // switched in order; the first is the line's own
}

func (s *Store) threadLine(site preview.Site) line {
	proj := s.cfg.Prefix + "previews/" + site.Project + "/"
	thread := proj + "threads/" + site.Thread + "/"
	return line{name: "preview " + site.String(), thread: site.Thread, donors: []string{proj + "latest"},
		blobScope: proj, blobs: proj + "blobs/", versions: thread + "versions/",
		pointers: []string{thread + "current", proj + "latest"}}
}

// liveLine is a project's live site: its own pointer beside the previews, sharing their blobs
// (a publish uploads nothing the latest preview already holds), never switching the latest.
func (s *Store) liveLine(project string) line {
	proj := s.cfg.Prefix + "previews/" + project + "/"
	return line{name: "live " + project, donors: []string{proj + "latest"}, blobScope: proj, blobs: proj + "blobs/",
		versions: proj + "live/versions/", pointers: []string{proj + "live/current"}}
}

func (s *Store) hostLine(host string) line {
	h := s.cfg.Prefix + "production/" + host + "/"
	return line{name: "production " + host, blobScope: h, blobs: h + "blobs/", versions: h + "versions/",
		pointers: []string{h + "current"}}
}

// previewPointer is the pointer key a Host names (Thread "" is the project's latest; live
// its live site).
func (s *Store) previewPointer(site preview.Site, live bool) string {
	if live {
		return s.liveLine(site.Project).pointers[0]
	}
	if site.Thread == "" {
		return s.threadLine(preview.Site{Project: site.Project, Thread: "x"}).pointers[1]
	}
	return s.threadLine(site).pointers[0]
}
