package app

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/api"
	"github.com/webordinary/webordinary/internal/broker"
	_ "github.com/webordinary/webordinary/internal/broker/awsq"   // aws://
	_ "github.com/webordinary/webordinary/internal/broker/mem"    // mem://
	_ "github.com/webordinary/webordinary/internal/broker/natsjs" // embedded://, nats://, tls://
	"github.com/webordinary/webordinary/internal/dashboard"
	"github.com/webordinary/webordinary/internal/egress"
	"github.com/webordinary/webordinary/internal/jobenv"
	"github.com/webordinary/webordinary/internal/live"
	"github.com/webordinary/webordinary/internal/mail/auth"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/sandbox"
	"github.com/webordinary/webordinary/internal/tenant"
)

// App is one webordinary process. New checks and prepares it; Run binds, builds, serves.
type App struct {
	cfg Config
	log *slog.Logger

	// Prepared by New (files read, nothing bound or written).
	smtpTLS *tls.Config
	auth    auth.Config
	jobVars []jobenv.Var

	// Set by Run.
	ln          listeners
	sandbox     *sandbox.Sandbox
	egress      *egress.Proxy // nil: jobs share the host's network (see openEgress)
	egressWhy   string        // why jobs share the host's network
	credsSource string        // where the engine credentials came from (no secret)
	aws         awsClients
	shotsRemote broker.Blobs // pictures between machines; nil when they share Worker.Shots
}

// listeners are serve's bound addresses; nil when not configured.
type listeners struct{ http, preview, smtp net.Listener }

// New validates cfg (see Config.Validate) and reads the files it names (certificates, DNS
// fixture). It binds nothing and writes nothing, so a configuration error leaves no trace.
func New(ctx context.Context, cfg Config) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, log: cfg.Logger}
	if err := a.parseJobEnv(); err != nil {
		return nil, err
	}
	if err := a.checkEgressAllow(); err != nil {
		return nil, err
	}
	if cfg.Role == RoleServe {
		if err := a.loadMailFiles(); err != nil {
			return nil, err
		}
	}
	return a, ctx.Err()
}

// Config is the validated configuration (defaults filled, paths absolute).
func (a *App) Config() Config { return a.cfg }

// Run runs the process until ctx ends or a component fails. In order: it reads the secrets
// held in Secrets Manager (readSecrets), binds every address
// (all or none: a taken one is an error naming it, before anything is written), prepares the
// data directory and, for serve, locks it (ServeLockFile: a second serve on it fails naming
// the first's pid), prepares secrets, opens the engine, builds the components and starts them under
// supervision. A component that fails is logged and stops the others, in reverse order of
// start within Config.ShutdownTimeout, and Run returns its error; after ctx ends Run returns
// nil once everything stopped. The engine is closed last, after every component returned.
func (a *App) Run(ctx context.Context) error {
	var undo cleanup
	defer undo.run()
	if err := a.readSecrets(ctx); err != nil {
		return err
	}
	if a.cfg.Role == RoleServe {
		if err := a.bind(&undo); err != nil {
			return err
		}
	}
	if err := a.prepareData(); err != nil {
		return err
	}
	if a.cfg.Role == RoleServe {
		lock, err := a.lockData()
		if err != nil {
			return err
		}
		defer func() { _ = lock.Release() }() // keeps it reachable: an unreachable file is closed
	}
	if a.runsJobs() {
		if err := a.openSandbox(); err != nil {
			return err
		}
		if err := a.openEgress(); err != nil {
			return err
		}
		defer a.egress.Close()
	}
	b, err := a.openEngine(ctx)
	if err != nil {
		return err
	}
	if err := a.openShotsRemote(ctx, b); err != nil {
		_ = b.Close()
		return err
	}
	comps, err := a.build(ctx, b)
	if err != nil {
		_ = b.Close()
		return err
	}
	err = a.supervise(ctx, comps)
	if !errors.Is(err, errStuck) {
		_ = b.Close() // never under a component still running
	}
	return err
}

// cleanup closes what a failed start opened, in reverse.
type cleanup []func()

func (c *cleanup) add(f func()) { *c = append(*c, f) }

// run runs the cleanups in reverse order. Its receiver is a pointer so that `defer undo.run()`
// runs what was added after the defer, not the empty list it saw then.
func (c *cleanup) run() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
}

// bind takes every configured address before anything else happens. The embedded engine's
// address is only checked (the engine binds it itself when it opens).
func (a *App) bind(undo *cleanup) error {
	binds := []struct {
		field, addr string
		ln          *net.Listener
	}{{"HTTPAddr", a.cfg.HTTPAddr, &a.ln.http}, {"PreviewAddr", a.cfg.PreviewAddr, &a.ln.preview},
		{"Mail.SMTPAddr", a.cfg.Mail.SMTPAddr, &a.ln.smtp}, {"EngineListen", a.fixedEngineListen(), nil}}
	for _, bd := range binds {
		if bd.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", bd.addr)
		if err != nil {
			return busy(bd.field, bd.addr, err)
		}
		if bd.ln == nil {
			_ = ln.Close()
			continue
		}
		*bd.ln = ln
		undo.add(func() { _ = ln.Close() })
	}
	return nil
}

// fixedEngineListen is EngineListen when it names a fixed port (checked before starting).
func (a *App) fixedEngineListen() string {
	if _, port, _ := net.SplitHostPort(a.cfg.EngineListen); port == "0" || port == "" {
		return ""
	}
	return a.cfg.EngineListen
}

// busy explains an address that cannot be bound.
func busy(field, addr string, err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		err = op.Err
	}
	return &FieldError{Field: field, Value: addr, Err: fmt.Errorf("cannot listen on %s: %w (is another webordinary running? pick another address)", addr, err)}
}

// prepareData creates the data directory (0700; missing parents 0755, so a sandboxed job's
// user can pass through them to its workspaces).
func (a *App) prepareData() error {
	d := a.cfg.Data
	if err := os.MkdirAll(filepath.Dir(d), 0o755); err != nil {
		return &FieldError{Field: "Data", Value: d, Err: err}
	}
	if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return &FieldError{Field: "Data", Value: d, Err: err}
	}
	return nil
}

// openEngine opens Config.Engine with its credentials.
func (a *App) openEngine(ctx context.Context) (*broker.Backend, error) {
	opts, err := a.engineOptions()
	if err != nil {
		return nil, err
	}
	b, err := broker.Open(ctx, a.cfg.Engine, opts)
	if err != nil {
		return nil, &FieldError{Field: "Engine", Value: a.cfg.Engine, Err: err}
	}
	return b, nil
}

// engineOptions: the configured credentials; else, for the embedded engine, the data
// directory's (generated on the first start); else the data directory's when present and
// the URL carries none (a worker on serve's machine).
func (a *App) engineOptions() (broker.Options, error) {
	c := a.cfg
	opts := broker.Options{User: c.EngineUser, Password: c.EnginePassword, Listen: c.EngineListen, NoSync: c.NoSync, Logger: a.log}
	if opts.User != "" {
		a.credsSource = "the configured user and password"
		return opts, nil
	}
	if c.embedded() {
		creds, err := loadOrCreateEngineCreds(c.Data)
		if err != nil {
			return opts, fmt.Errorf("engine credentials: %w", err)
		}
		opts.User, opts.Password = creds.User, creds.Password
		a.credsSource = SecretPath(c.Data, EngineCredsFile)
		return opts, nil
	}
	if strings.Contains(strings.SplitN(c.Engine, ",", 2)[0], "@") {
		return opts, nil // the URL's own
	}
	creds, ok, err := ReadEngineCreds(c.Data)
	if err != nil {
		return opts, err
	}
	if ok {
		opts.User, opts.Password = creds.User, creds.Password
	}
	return opts, nil
}

// build makes every component on b, in start order.
func (a *App) build(ctx context.Context, b *broker.Backend) ([]component, error) {
	hub := live.NewHub(0)
	if a.cfg.Role == RoleWorker {
		pool, err := a.newPool(ctx, b, hub, a.cfg.Worker.PreviewPort)
		if err != nil {
			return nil, err
		}
		a.banner("webordinary worker: %d workers on %s (processor %s)\n  sandbox: %s\n",
			a.cfg.Worker.Count, b.Describe, a.cfg.Worker.Processor, a.describeSandbox())
		return []component{{"workers", pool.Run}}, nil
	}
	return a.buildServe(ctx, b, hub)
}

// buildServe makes serve's components: router, workers, mail outbox, SMTP intake, preview
// server, HTTP API and dashboard.
func (a *App) buildServe(ctx context.Context, b *broker.Backend, hub *live.Hub) ([]component, error) {
	token, tokenSource, newToken, err := a.apiToken()
	if err != nil {
		return nil, err
	}
	projects, err := project.Open(ctx, b)
	if err != nil {
		return nil, err
	}
	var mail *mailParts
	r, err := a.newRouter(b, projects, func() *mailParts { return mail })
	if err != nil {
		return nil, err
	}
	httpBase := "http://" + a.ln.http.Addr().String()
	jobBase := strings.TrimRight(cmp.Or(a.cfg.PublicURL, httpBase), "/")
	if mail, err = a.buildMail(ctx, b, r, jobBase); err != nil {
		return nil, err
	}
	comps := []component{{"router", r.Run}}
	local := func() []broker.WorkerInfo { return nil }
	if a.cfg.Worker.Count > 0 { // 0: router and API only, workers run elsewhere
		pool, err := a.newPool(ctx, b, hub, a.previewPort())
		if err != nil {
			return nil, err
		}
		comps, local = append(comps, component{"workers", pool.Run}), pool.Status
	}
	comps = append(comps, component{"mail outbox", mail.outbox.Run}, component{"held mail notices", mail.in.Run})
	if pics := a.pictures(); pics != nil {
		comps = append(comps, component{"pictures retention", prunePictures(*pics)})
	}
	if mail.smtp != nil {
		comps = append(comps, component{"SMTP intake", mail.smtp.Run})
	}
	if mail.ses != nil {
		comps = append(comps, component{"SES inbound", mail.ses.Run})
	}
	if a.ln.preview != nil {
		h, err := a.previewHandler(ctx, b)
		if err != nil {
			return nil, err
		}
		comps = append(comps, component{"preview server", serveHTTP(&http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, a.ln.preview)})
	}
	handler, err := a.httpHandler(b, r, projects, hub, mail, local, token)
	if err != nil {
		return nil, err
	}
	comps = append(comps, component{"HTTP API", serveHTTP(&http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}, a.ln.http)})
	a.announce(b, mail, tokenSource)
	if newToken {
		a.announceToken(token)
	}
	return comps, a.writeReady(b, mail)
}

// newRouter makes the router; a tenant's interrupt policy is its project's, else
// Config.InterruptPolicy.
func (a *App) newRouter(b *broker.Backend, projects *project.Store, mail func() *mailParts) (*router.Router, error) {
	policy := string(a.cfg.InterruptPolicy)
	return router.New(router.Config{Backend: b, Logger: a.log, ReconcileEvery: a.cfg.ReconcileEvery,
		Policy: func(ctx context.Context, t tenant.ID) router.Policy {
			return router.Policy(projects.InterruptPolicy(ctx, t.Project, policy))
		},
		OnResult: func(ctx context.Context, res broker.Result) error {
			a.log.InfoContext(ctx, "result", slog.String("tenant", res.Tenant.String()), slog.String("job", res.JobID), slog.String("state", string(res.State)))
			if m := mail(); m != nil {
				return m.in.OnResult(ctx, res)
			}
			return nil
		}})
}

func (a *App) httpHandler(b *broker.Backend, r *router.Router, projects *project.Store, hub *live.Hub, mail *mailParts,
	local func() []broker.WorkerInfo, token string) (http.Handler, error) {
	apiServer := &api.Server{Backend: b, Router: r, Logger: a.log, LocalWorkers: local, Projects: projects,
		InspectMail: mail.inspect, Quarantine: mail.quarantine()}
	if h := mail.held(); h != nil {
		apiServer.Held = h
	}
	if mail != nil && mail.outbox != nil {
		apiServer.Replies = mail.outbox
	}
	if mail != nil && mail.in != nil {
		apiServer.RevokeThreadLinks = mail.in.RevokeThread
	}
	apiHandler := apiServer.Handler()
	mail.registerMetrics()
	dash, err := dashboard.New(dashboard.Config{Backend: b, Router: r, Live: hub, Local: local,
		Token: token, Hosts: a.cfg.allowedHosts(), Quarantine: mail.quarantine(), Held: dashHeld(mail), Replies: dashReplies(mail), Notice: a.cfg.notice(),
		Pictures: a.pictures(), Logger: a.log})
	if err != nil {
		return nil, err
	}
	return routes(dash, apiHandler, mail.in.PublishHandler(), mail.in.ThreadHandler()), nil
}

// dashReplies is the dashboard's view of the parked replies, nil when serve sends none.
func dashReplies(mail *mailParts) dashboard.Replies {
	if mail == nil || mail.outbox == nil {
		return nil
	}
	return mail.outbox
}

// dashHeld is the dashboard's view of the held mail, nil without an SMTP listener.
func dashHeld(mail *mailParts) dashboard.Held {
	if h := mail.held(); h != nil {
		return h
	}
	return nil
}

// previewPort is the port in preview links: the preview server's, else Worker.PreviewPort.
func (a *App) previewPort() int {
	if a.ln.preview != nil {
		return a.ln.preview.Addr().(*net.TCPAddr).Port
	}
	return a.cfg.Worker.PreviewPort
}

func (a *App) banner(format string, args ...any) {
	if a.cfg.Banner != nil {
		fmt.Fprintf(a.cfg.Banner, format, args...)
	}
}

func (a *App) announce(b *broker.Backend, mail *mailParts, tokenSource string) {
	previews := "not served"
	if a.ln.preview != nil {
		previews = fmt.Sprintf("http://edit.<project>.%s:%d/ (serving %s)", a.cfg.Worker.PreviewDomain, a.previewPort(), a.cfg.Worker.Previews)
	}
	engine := b.Describe
	if a.credsSource != "" && b.Endpoint != "" {
		engine += " (credentials: " + a.credsSource + ")"
	}
	a.banner("webordinary serving\n  dashboard and API: http://%s/ (token in %s)\n  mail:     %s\n  previews: %s\n  engine:   %s\n  data:     %s\n  workers:  %d (processor %s)\n  sandbox:  %s\n",
		a.ln.http.Addr(), tokenSource, a.describeMail(mail), previews, engine, a.cfg.Data, a.cfg.Worker.Count, a.cfg.Worker.Processor, a.describeSandbox())
}

// announceToken prints a newly generated token once, with how to use it.
func (a *App) announceToken(token string) {
	a.banner(`
  A new API and dashboard token was generated into %s (shown only now):
    %s
  Browser: open http://%s/?token=%s once (it sets a cookie).
  CLI on this machine: reads it from --data (WO_DATA); elsewhere pass --token or WO_TOKEN.

`, SecretPath(a.cfg.Data, APITokenFile), token, a.ln.http.Addr(), token)
}

// writeReady writes Config.ReadyFile: {"api":URL,"smtp":addr,"nats":URL,"preview":addr}.
func (a *App) writeReady(b *broker.Backend, mail *mailParts) error {
	if a.cfg.ReadyFile == "" {
		return nil
	}
	ready := map[string]string{"api": "http://" + a.ln.http.Addr().String()}
	if mail.smtp != nil {
		ready["smtp"] = mail.smtp.Addr().String()
	}
	if b.Endpoint != "" {
		ready["nats"] = b.Endpoint
	}
	if a.ln.preview != nil {
		ready["preview"] = a.ln.preview.Addr().String()
	}
	data, _ := json.Marshal(ready)
	tmp := a.cfg.ReadyFile + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return &FieldError{Field: "ReadyFile", Value: a.cfg.ReadyFile, Err: err}
	}
	return os.Rename(tmp, a.cfg.ReadyFile)
}
