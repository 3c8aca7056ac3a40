package dashboard

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/live"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/shots"
)

// Config configures a Dashboard.
type Config struct {
	// Backend provides the broker ports the pages read. Required.
	Backend *broker.Backend
	// Router carries the operator's actions (interrupt, release, retry). Required.
	Router *router.Router
	// Live, when set, shows a running job's agent output on its page.
	Live *live.Hub
	// Local, when set, reports this process's workers first-hand (presence lags a heartbeat).
	Local func() []broker.WorkerInfo
	// Quarantine, when set, shows the mail intake's quarantine (list, release, delete).
	Quarantine Quarantine
	// Held, when set, shows the mail held over a sender's limit (list, release, drop).
	Held Held
	// Replies, when set, shows the replies that could not be sent (list, send again, drop).
	Replies Replies
	// Token, when set, is required on every request (Authorization: Bearer, or ?token= once,
	// which sets an HttpOnly cookie). serve always sets one. Without it only loopback Host
	// names are served.
	Token string
	// Hosts are the host names (or host:port; the port is ignored) that requests may name in
	// their Host header besides loopback ones: the public URL's. Any other Host is refused,
	// token or not (DNS rebinding).
	Hosts []string
	// Notice, when set, is shown at the top of every page (serve's local mail testing mode).
	Notice string
	// Pictures, when set, shows each finished job's pictures of its change (before, after,
	// marked) on its page.
	Pictures *shots.Store
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
}

const (
	// pollEvery is how often the live pages read the status while someone watches.
	pollEvery = 500 * time.Millisecond
	// recentJobs is how many jobs the overview lists.
	recentJobs = 50
)

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Backend == nil:
		return errors.New("dashboard: no backend configured")
	case c.Router == nil:
		return errors.New("dashboard: no router configured (actions need it)")
	}
	return nil
}

// Dashboard serves the web UI. Safe for concurrent use.
type Dashboard struct {
	cfg   Config
	b     *broker.Backend
	log   *slog.Logger
	csrf  string
	pages *pages
	feed  *feed
}

// New validates cfg and returns a Dashboard.
func New(cfg Config) (*Dashboard, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	d := &Dashboard{cfg: cfg, b: cfg.Backend, log: cfg.Logger, csrf: randomToken(), pages: p}
	d.feed = newFeed(pollEvery, d.overviewSections)
	return d, nil
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Handler returns the dashboard's routes behind its access checks.
func (d *Dashboard) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", d.overview)
	mux.HandleFunc("GET /events", d.overviewEvents)
	mux.HandleFunc("GET /jobs/{id}", d.job)
	mux.HandleFunc("GET /jobs/{id}/events", d.jobEvents)
	mux.HandleFunc("GET /jobs/{id}/pictures/{file}", d.picture)
	mux.HandleFunc("POST /jobs/{id}/interrupt", d.interrupt)
	mux.HandleFunc("POST /tenants/{project}/{user}/release", d.release)
	mux.HandleFunc("POST /tenants/{project}/{user}/force-release", d.forceRelease)
	mux.HandleFunc("POST /tenants/{project}/{user}/claim", d.claim)
	mux.HandleFunc("GET /dead", d.dead)
	mux.HandleFunc("POST /dead/{project}/{user}/{job}/retry", d.retry)
	mux.HandleFunc("POST /dead/{project}/{user}/{job}/discard", d.discard)
	q, h := d.quarantineShelf(), d.heldShelf()
	mux.HandleFunc("GET /quarantine", d.show(q))
	mux.HandleFunc("POST /quarantine/{id}/release", d.onShelf(q, "release mail", q.release))
	mux.HandleFunc("POST /quarantine/{id}/delete", d.onShelf(q, "delete mail", q.remove))
	mux.HandleFunc("GET /held", d.show(h))
	mux.HandleFunc("POST /held/{id}/release", d.onShelf(h, "release held mail", h.release))
	mux.HandleFunc("POST /held/{id}/drop", d.onShelf(h, "drop held mail", h.remove))
	mux.HandleFunc("GET /replies", d.replies)
	mux.HandleFunc("POST /replies/{id}/retry", d.onReply("send a parked reply again", Replies.Retry))
	mux.HandleFunc("POST /replies/{id}/drop", d.onReply("drop a parked reply", Replies.Drop))
	mux.HandleFunc("GET /static/{file}", staticFile)
	return d.secure(mux)
}

// staticFiles are the assets served under /static/ (no directory listing).
var staticFiles = map[string]bool{"app.js": true, "style.css": true}

func staticFile(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	if !staticFiles[name] {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeFileFS(w, r, assets, "static/"+name)
}
