package shots

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/preview"
	"github.com/webordinary/webordinary/internal/sandbox"
)

// Defaults.
const (
	DefaultPages      = 3
	DefaultPageBudget = 5 * time.Second
	DefaultBudget     = 30 * time.Second
	DefaultMailBytes  = 1 << 20
	// DefaultParallel is how many pictures render at once in a job's browser.
	DefaultParallel = 2
)

// Config configures a Shooter.
type Config struct {
	// Dir keeps each job's pictures and report: Dir/<job>/. Required. The reply composer and
	// the dashboard read them from there: workers and the server share it, unless Remote is
	// set.
	Dir string
	// Remote, when set, receives a copy of each job's pictures (Store.Remote), for servers
	// on other machines.
	Remote broker.Blobs
	// Browser is the Chromium binary; "" finds one (FindBrowser). None found: jobs get no
	// pictures and their report says why.
	Browser string
	// Sandbox jails the browser: the job's uid, no network namespace, a private /tmp, the
	// toolchain read-only. Nil or inactive: the browser runs unjailed (still with no network
	// but the pipe, see the package doc).
	Sandbox *sandbox.Sandbox
	// Pages is how many changed pages get pictures, most relevant first. Default 3.
	Pages int
	// Widths are the viewports each page is rendered at. Default Desktop and Phone.
	Widths []Width
	// PageBudget bounds one picture (load, settle, capture). Default 5 s. A page whose script
	// never yields is cut off here and gets no picture.
	PageBudget time.Duration
	// Budget bounds a job's pictures altogether, browser start included. Default 30 s.
	Budget time.Duration
	// MailBytes bounds the pictures of one reply together. Default 1 MiB.
	MailBytes int
	// Parallel is how many tabs render at once. Default 2.
	Parallel int
	// Logger; default discard.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Browser == "" {
		c.Browser = FindBrowser()
	}
	if c.Pages == 0 {
		c.Pages = DefaultPages
	}
	if len(c.Widths) == 0 {
		c.Widths = []Width{Desktop, Phone}
	}
	if c.PageBudget == 0 {
		c.PageBudget = DefaultPageBudget
	}
	if c.Budget == 0 {
		c.Budget = DefaultBudget
	}
	if c.MailBytes == 0 {
		c.MailBytes = DefaultMailBytes
	}
	if c.Parallel == 0 {
		c.Parallel = DefaultParallel
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Dir == "":
		return errors.New("shots: Dir is required: the directory to keep pictures in")
	case c.Pages < 0:
		return fmt.Errorf("shots: Pages is %d: use 0 for the default (%d) or more", c.Pages, DefaultPages)
	case c.PageBudget < 0 || c.Budget < 0:
		return errors.New("shots: PageBudget and Budget must be positive")
	}
	for _, w := range c.Widths {
		if w.Name == "" || w.Width < 100 || w.Height < 100 {
			return fmt.Errorf("shots: width %+v: needs a name and at least 100×100 pixels", w)
		}
	}
	return nil
}

// Shooter takes the pictures of jobs. Safe for concurrent use: each job gets a browser of its
// own, so one tenant's page never shares a process with another's.
type Shooter struct {
	cfg    Config
	store  Store
	l      *launcher
	pruned atomic.Int64 // when the store was last pruned (Unix ns)
}

// New validates cfg and creates its directory. A missing browser is not an error: Shoot then
// reports why there are no pictures.
func New(cfg Config) (*Shooter, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("shots: %w", err)
	}
	return &Shooter{cfg: cfg, store: Store{Dir: cfg.Dir, Remote: cfg.Remote}, l: &launcher{path: cfg.Browser, sb: cfg.Sandbox}}, nil
}

// Store returns the store the shooter writes to, for reading back what it took: its own
// directory, with no round trip to Remote.
func (s *Shooter) Store() Store { return Store{Dir: s.store.Dir} }

// Request is one job's deploy to take pictures of.
type Request struct {
	JobID string
	// Before is what the owner had before the deploy; nil when that is not known (no page
	// is then called new, and nothing is outlined).
	Before *preview.Version
	// After is the version the deploy published. Required.
	After *preview.Version
	// Sources are the repository paths the job changed; they rank the pages (see Pick).
	Sources []string
	// Warm, when set, is the browser to use, started ahead (Shooter.Warm); Shoot takes it
	// over, or closes it when it has nothing to render.
	Warm *Warm
}

// Shoot picks the pages the deploy changed, renders each before and after at every width,
// marks what changed, drops pages with no visible change, stores the pictures and the report
// under Dir/<job>/ and returns the report. It never fails the job: a report always comes
// back, and the error (also in Report.Note) says why pictures are missing. ctx ends the work
// early (the job was interrupted).
func (s *Shooter) Shoot(ctx context.Context, req Request) (Report, error) {
	start := time.Now()
	defer req.Warm.Close() // unless taken
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Budget)
	defer cancel()
	rep, err := s.shoot(ctx, req)
	if err != nil {
		rep.Note = "No pictures: " + err.Error()
	}
	rep.DurationMs = time.Since(start).Milliseconds()
	if serr := s.store.save(req.JobID, rep); serr != nil && err == nil {
		err = serr
	} else if serr == nil {
		if perr := s.store.publish(context.WithoutCancel(ctx), req.JobID); perr != nil {
			s.cfg.Logger.WarnContext(ctx, "pictures not copied to the engine: other machines' replies and job pages go without them",
				slog.String("job", req.JobID), slog.Any("err", perr))
		}
	}
	s.log(ctx, req, rep, err)
	return rep, err
}

func (s *Shooter) shoot(ctx context.Context, req Request) (Report, error) {
	if req.After == nil {
		return Report{}, errors.New("no preview to take pictures of")
	}
	var before map[string]preview.File
	if req.Before != nil {
		before = req.Before.Files()
	}
	cands := Pick(before, req.After.Files(), req.Sources, s.cfg.Pages)
	if len(cands) == 0 {
		return Report{Note: "No page changed, so there is nothing to show."}, nil
	}
	if s.cfg.Browser == "" {
		return Report{}, fmt.Errorf("%w installed (install the chromium package)", ErrNoBrowser)
	}
	if err := s.store.reset(req.JobID); err != nil {
		return Report{}, err
	}
	s.maybePrune()
	results, err := s.renderAll(ctx, req, cands)
	if err != nil {
		return Report{}, err
	}
	return s.compose(req.JobID, cands, results)
}

// job is one picture to render: a candidate at a width, before or after.
type job struct {
	page, width int
	before      bool
}

// renderAll renders every candidate at every width, after and (when the previous version had
// the page) before, in s.cfg.Parallel tabs, each picture within the page budget.
func (s *Shooter) renderAll(ctx context.Context, req Request, cands []Candidate) (map[job]result, error) {
	var jobs []job
	for w := range s.cfg.Widths { // by width, so a tab mostly keeps its viewport
		for i, c := range cands {
			if !c.New && req.Before != nil {
				jobs = append(jobs, job{i, w, true})
			}
			jobs = append(jobs, job{i, w, false})
		}
	}
	out := make(map[job]result, len(jobs))
	keys := map[job]string{}
	queue := make(chan job, len(jobs))
	for _, j := range jobs {
		keys[j] = s.cacheKey(req, cands[j.page], j)
		if img, ok := s.store.cached(keys[j]); ok {
			out[j] = result{rendered: rendered{img: img}, key: keys[j], cached: true}
			continue
		}
		queue <- j
	}
	close(queue)
	if len(queue) == 0 {
		req.Warm.Close()
		return out, nil // all from the cache: no browser needed
	}
	b, tabs, err := s.browser(ctx, req.Warm)
	if err != nil {
		return nil, fmt.Errorf("the browser did not start: %w", err)
	}
	defer func() { go b.close() }() // the reply need not wait for the browser to exit
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range min(s.cfg.Parallel, len(queue)) {
		var t *tab
		if i < len(tabs) {
			t = tabs[i]
		}
		wg.Go(func() {
			s.renderQueue(ctx, b, t, req, cands, queue, func(j job, r result) {
				r.key = keys[j]
				mu.Lock()
				out[j] = r
				mu.Unlock()
			})
		})
	}
	wg.Wait()
	return out, nil
}

// browser returns the warm browser and its tabs, or starts one.
func (s *Shooter) browser(ctx context.Context, w *Warm) (*browser, []*tab, error) {
	if b, tabs, ok := w.take(ctx); ok {
		return b, tabs, nil
	}
	b, err := s.l.start(ctx)
	return b, nil, err
}

// renderQueue renders jobs from queue in tab t (nil: one it opens), opening a fresh tab after
// a failure (the page may still be running).
func (s *Shooter) renderQueue(ctx context.Context, b *browser, t *tab, req Request, cands []Candidate, queue <-chan job, done func(job, result)) {
	defer func() {
		if t != nil {
			t.close()
		}
	}()
	for j := range queue {
		var err error
		if t == nil {
			tt := time.Now()
			t, err = b.newTab(ctx)
			s.cfg.Logger.DebugContext(ctx, "shots: tab", slog.Duration("took", time.Since(tt)))
			if err != nil {
				done(j, result{err: fmt.Errorf("open a tab: %w", err)})
				continue
			}
		}
		r := s.renderOne(ctx, t, req, cands[j.page], j)
		if r.err != nil {
			t.close()
			t = nil
		}
		done(j, r)
	}
}

// result is one rendered picture, or why there is none.
type result struct {
	rendered
	key    string // its cache key
	cached bool   // reused, not rendered
	err    error
}

// cacheKey names a picture by what it shows: the version's content, the page, the viewport.
// The previous job's after picture is the next job's before picture, so a follow-up in a
// thread renders only its after pictures.
func (s *Shooter) cacheKey(req Request, c Candidate, j job) string {
	v := req.After
	if j.before {
		v = req.Before
	}
	w := s.cfg.Widths[j.width]
	return hashKey(fmt.Sprintf("%s\x00%s\x00%s %dx%d mobile=%v max=%d", v.Digest(), c.Path, w.Name, w.Width, w.Height, w.Mobile, 3*w.Height))
}

func (s *Shooter) renderOne(ctx context.Context, t *tab, req Request, c Candidate, j job) result {
	w := s.cfg.Widths[j.width]
	site := req.After
	if j.before {
		site = req.Before
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.PageBudget)
	defer cancel()
	start := time.Now()
	r, err := t.render(pctx, shot{path: c.Path, width: w, site: site, version: site.ID(), maxHeight: 3 * w.Height})
	s.cfg.Logger.DebugContext(ctx, "shots: rendered", slog.String("job", req.JobID), slog.String("path", c.Path),
		slog.String("width", w.Name), slog.Bool("before", j.before), slog.Duration("took", time.Since(start)), slog.Any("error", err))
	if err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		err = fmt.Errorf("cut off after %s (the page kept the browser busy): %w", s.cfg.PageBudget, err)
	}
	return result{rendered: r, err: err}
}

// cacheAge is how long cached pictures are kept for the jobs after.
const cacheAge = 7 * 24 * time.Hour

// maybePrune prunes the store (Store.Prune) in the background, at most once an hour.
func (s *Shooter) maybePrune() {
	now := time.Now()
	last := s.pruned.Load()
	if now.UnixNano()-last < int64(time.Hour) || !s.pruned.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	go s.store.Prune(context.Background(), now)
}

func (s *Shooter) log(ctx context.Context, req Request, rep Report, err error) {
	attrs := []any{slog.String("job", req.JobID), slog.Int("pages", len(rep.Pages)),
		slog.Int64("durationMs", rep.DurationMs), slog.Int("mailBytes", rep.MailBytes)}
	if err != nil {
		s.cfg.Logger.WarnContext(ctx, "shots: no pictures", append(attrs, slog.Any("error", err))...)
		return
	}
	s.cfg.Logger.InfoContext(ctx, "shots taken", attrs...)
}
