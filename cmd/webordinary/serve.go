package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/webordinary/webordinary/internal/api"
	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/natsjs"
	"github.com/webordinary/webordinary/internal/command"
	"github.com/webordinary/webordinary/internal/dashboard"
	"github.com/webordinary/webordinary/internal/live"
	"github.com/webordinary/webordinary/internal/pipeline"
	"github.com/webordinary/webordinary/internal/preview"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/tenant"
	"github.com/webordinary/webordinary/internal/worker"
)

type serveFlags struct {
	data, httpAddr, previewAddr, natsListen, natsURL, natsUser, natsPassword, readyFile, token, publicURL string
	noSync                                                                                                bool
	reconcile                                                                                             time.Duration
	policy                                                                                                string
	workerFlags
	logFlags
	mail mailFlags
}

func runServe(ctx context.Context, args []string) error {
	f, err := parseServe(args)
	if err != nil {
		return err
	}
	return f.run(ctx)
}

// parseServe parses serve's flags (also used by demo).
func parseServe(args []string) (*serveFlags, error) {
	f := &serveFlags{}
	fs := newFlags("serve", "[flags]")
	fs.StringVar(&f.data, "data", ".webordinary", "data directory (JetStream files, workspaces)")
	fs.StringVar(&f.httpAddr, "http", "127.0.0.1:8080", "HTTP API address")
	fs.StringVar(&f.previewAddr, "preview", "127.0.0.1:8081", "preview server address (http://edit.<project>.localhost:<port>/); empty = none")
	fs.StringVar(&f.natsListen, "nats-listen", "127.0.0.1:4222", "where the embedded NATS accepts other worker processes; empty = in-process only")
	fs.StringVar(&f.natsURL, "nats", "", "use this external NATS server or cluster instead of the embedded one")
	fs.StringVar(&f.natsUser, "nats-user", "", "NATS user (default: generated once into <data>/secrets/nats.json for the embedded engine)")
	fs.StringVar(&f.natsPassword, "nats-password", "", "NATS password (with --nats-user)")
	fs.BoolVar(&f.noSync, "no-sync", false, "do not fsync every write (faster; a power loss may lose the last accepted jobs)")
	fs.DurationVar(&f.reconcile, "reconcile", 3*time.Second, "reconciler period")
	fs.StringVar(&f.policy, "interrupt-policy", "interrupt", "what a new instruction does to a running job: interrupt or queue")
	fs.StringVar(&f.publicURL, "public-url", "", "the dashboard's address as people reach it, for job links in replies; its host is the only non-loopback Host name the dashboard and API answer to (default http://<--http>)")
	fs.StringVar(&f.token, "dashboard-token", "", "token required by the dashboard and API (default: generated once into <data>/secrets/api-token)")
	fs.StringVar(&f.readyFile, "ready-file", "", "when ready, write {\"api\":URL,\"nats\":URL} to this file (for scripts and supervisors)")
	f.workerFlags.register(fs, 4)
	f.logFlags.register(fs)
	f.mail.register(fs)
	return f, parse(fs, args)
}

func (f *serveFlags) run(ctx context.Context) error {
	log, err := f.logger(os.Stderr)
	if err != nil {
		return err
	}
	hosts, err := allowedHosts(f.httpAddr, f.publicURL)
	if err != nil {
		return err
	}
	policy := router.Policy(f.policy)
	if policy != router.PolicyInterrupt && policy != router.PolicyQueue {
		return fmt.Errorf("--interrupt-policy %q: use interrupt or queue", f.policy)
	}
	f.defaults(f.data)
	tokenSource, newToken, err := f.apiToken()
	if err != nil {
		return err
	}
	previewLn, err := f.listenPreview()
	if err != nil {
		return err
	}
	eng, err := f.engine(ctx)
	if err != nil {
		return err
	}
	defer eng.close()
	var mail *mailParts
	r, err := router.New(router.Config{Backend: eng.backend, Logger: log, ReconcileEvery: f.reconcile,
		Policy: func(context.Context, tenant.ID) router.Policy { return policy },
		OnResult: func(ctx context.Context, res broker.Result) error {
			log.InfoContext(ctx, "result", slog.String("tenant", res.Tenant.String()), slog.String("job", res.JobID), slog.String("state", string(res.State)))
			if mail == nil {
				return nil
			}
			return mail.in.OnResult(ctx, res)
		}})
	if err != nil {
		return err
	}
	var jobBase string // set once the HTTP listener is up
	jobURL := func(id string) string {
		if jobBase == "" {
			return ""
		}
		return jobBase + "/jobs/" + id
	}
	if mail, err = f.mail.build(ctx, f.data, eng.backend, r, jobURL, log); err != nil {
		return err
	}
	projects, err := project.Open(ctx, eng.backend)
	if err != nil {
		return err
	}
	hub := live.NewHub(0)
	var pool *worker.Pool
	if f.workers > 0 { // --workers 0: router and API only, workers run elsewhere
		if pool, err = newPool(ctx, f.data, f.workerFlags, eng.backend, hub, log); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", f.httpAddr)
	if err != nil {
		return fmt.Errorf("--http %s: %w (is another webordinary running? pick another port)", f.httpAddr, err)
	}
	jobBase = strings.TrimRight(f.publicURL, "/")
	if jobBase == "" {
		jobBase = "http://" + ln.Addr().String()
	}
	apiHandler := (&api.Server{Backend: eng.backend, Router: r, Logger: log, LocalWorkers: localWorkers(pool), Projects: projects,
		InspectMail: mail.in.Inspect, Quarantine: mail.quarantine()}).Handler()
	mail.registerMetrics()
	dash, err := dashboard.New(dashboard.Config{Backend: eng.backend, Router: r, Live: hub, Local: localWorkers(pool),
		Token: f.token, Hosts: hosts, Quarantine: mail.quarantine(), Notice: f.mail.dashboardNotice(), Logger: log})
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: routes(dash, apiHandler), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(os.Stderr, "webordinary serving\n  dashboard and API: http://%s/ (token in %s)\n  mail:     %s\n  previews: %s\n  engine:   %s\n  data:     %s\n  workers:  %d (processor %s)\n  sandbox:  %s\n",
		ln.Addr(), tokenSource, mail.describe(f.data), f.previewURL(previewLn), eng.describe, f.data, f.workers, f.processor, f.job.describe())
	if newToken {
		announceToken(ln.Addr().String(), f.token, f.data)
	}
	if err := f.writeReady(ln.Addr().String(), eng, mail); err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(ctx) })
	if pool != nil {
		wg.Go(func() { _ = pool.Run(ctx) })
	}
	wg.Go(func() { serveHTTP(ctx, srv, ln, log) })
	wg.Go(func() { _ = mail.outbox.Run(ctx) })
	if mail.smtp != nil {
		wg.Go(func() { _ = mail.smtp.Run(ctx) })
	}
	if previewLn != nil {
		psrv, err := f.previewServer(log)
		if err != nil {
			return err
		}
		wg.Go(func() { serveHTTP(ctx, psrv, previewLn, log) })
	}
	wg.Wait()
	return nil
}

func (f *serveFlags) writeReady(apiAddr string, eng *engine, mail *mailParts) error {
	if f.readyFile == "" {
		return nil
	}
	ready := map[string]string{"api": "http://" + apiAddr}
	if mail.smtp != nil {
		ready["smtp"] = mail.smtp.Addr().String()
	}
	if eng.srv != nil && f.natsListen != "" {
		ready["nats"] = eng.srv.ClientURL()
	}
	data, _ := json.Marshal(ready)
	tmp := f.readyFile + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("--ready-file: %w", err)
	}
	return os.Rename(tmp, f.readyFile)
}

func serveHTTP(ctx context.Context, srv *http.Server, ln net.Listener, log *slog.Logger) {
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("http server", slog.Any("err", err))
	}
}

// engine is a connected backend and what to close.
type engine struct {
	backend  *broker.Backend
	nc       *nats.Conn
	srv      *server.Server
	describe string
}

func (e *engine) close() {
	e.nc.Close()
	if e.srv != nil {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
	}
}

func (f *serveFlags) engine(ctx context.Context) (*engine, error) {
	if f.natsURL != "" {
		return connectEngine(ctx, f.natsURL, f.natsUser, f.natsPassword)
	}
	creds, source, err := f.engineCreds()
	if err != nil {
		return nil, err
	}
	listen := f.natsListen
	if strings.HasSuffix(listen, ":0") {
		listen = strings.TrimSuffix(listen, ":0") + ":-1"
	}
	srv, err := natsjs.StartServer(natsjs.ServerConfig{Dir: filepath.Join(f.data, "nats"), NoSync: f.noSync,
		Listen: listen, User: creds.User, Password: creds.Password})
	if err != nil {
		return nil, err
	}
	nc, err := natsjs.ConnectInProcess(srv, creds.User, creds.Password)
	if err != nil {
		srv.Shutdown()
		return nil, err
	}
	b, err := natsjs.New(ctx, nc, natsjs.Config{})
	if err != nil {
		nc.Close()
		srv.Shutdown()
		return nil, err
	}
	desc := "embedded NATS (in-process only)"
	if f.natsListen != "" {
		desc = "embedded NATS, workers may join at " + srv.ClientURL() + " (credentials: " + source + ")"
	}
	return &engine{backend: b, nc: nc, srv: srv, describe: desc}, nil
}

// engineCreds are the embedded engine's credentials: --nats-user and --nats-password, else
// the data directory's (generated on the first start); source says which, without the password.
func (f *serveFlags) engineCreds() (natsCreds, string, error) {
	if f.natsUser != "" || f.natsPassword != "" {
		if f.natsUser == "" || f.natsPassword == "" {
			return natsCreds{}, "", errors.New("set both --nats-user and --nats-password, or neither (serve then generates them into <data>/secrets/nats.json)")
		}
		return natsCreds{User: f.natsUser, Password: f.natsPassword}, "--nats-user/--nats-password", nil
	}
	c, err := loadOrCreateNATSCreds(f.data)
	if err != nil {
		return natsCreds{}, "", fmt.Errorf("engine credentials: %w", err)
	}
	return c, secretPath(f.data, natsCredsFile), nil
}

// connectEngine connects to a NATS server; user and password, when set, are sent unless the
// URL carries its own.
func connectEngine(ctx context.Context, url, user, password string) (*engine, error) {
	var opts []nats.Option
	if user != "" {
		opts = append(opts, nats.UserInfo(user, password))
	}
	nc, err := natsjs.Connect(url, "webordinary", opts...)
	if err != nil {
		return nil, err
	}
	b, err := natsjs.New(ctx, nc, natsjs.Config{})
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &engine{backend: b, nc: nc, describe: "NATS at " + nc.ConnectedUrlRedacted()}, nil
}

// listenPreview opens the preview server's listener, so workers report its real port.
func (f *serveFlags) listenPreview() (net.Listener, error) {
	if f.previewAddr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", f.previewAddr)
	if err != nil {
		return nil, fmt.Errorf("--preview %s: %w (pick another port, or --preview '' to run none)", f.previewAddr, err)
	}
	f.previewPort = ln.Addr().(*net.TCPAddr).Port
	return ln, nil
}

func (f *serveFlags) previewURL(ln net.Listener) string {
	if ln == nil {
		return "not served (--preview '')"
	}
	return fmt.Sprintf("http://edit.<project>.%s:%d/ (serving %s)", f.previewDomain, f.previewPort, f.previews)
}

func (f *serveFlags) previewServer(log *slog.Logger) (*http.Server, error) {
	h, err := preview.NewServer(preview.ServerConfig{Root: f.previews, Domain: f.previewDomain, Logger: log})
	if err != nil {
		return nil, err
	}
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}, nil
}

func newPool(ctx context.Context, data string, f workerFlags, b *broker.Backend, hub *live.Hub, log *slog.Logger) (*worker.Pool, error) {
	if f.processor != "noop" {
		if err := f.job.open(log, data, f.workspaces, f.state); err != nil {
			return nil, err
		}
	}
	proc, err := newProcessor(ctx, f, b, hub, log)
	if err != nil {
		return nil, err
	}
	cfg := f.config()
	cfg.Backend, cfg.Processor, cfg.Logger = b, proc, log
	if f.processor != "noop" {
		cfg.Sandbox = f.job.sb.Short()
	}
	return worker.New(cfg)
}

func newProcessor(ctx context.Context, f workerFlags, b *broker.Backend, hub *live.Hub, log *slog.Logger) (worker.Processor, error) {
	switch f.processor {
	case "pipeline":
		return newPipeline(ctx, f, b, hub, log)
	case "command":
		return command.New(command.Config{Command: f.agentCommand, Root: f.workspaces, Sandbox: f.job.sb, JobEnv: f.job.vars})
	case "noop":
		return worker.ProcessorFunc(func(context.Context, worker.Task) (worker.Outcome, error) {
			return worker.Outcome{Summary: "noop"}, nil
		}), nil
	}
	return nil, fmt.Errorf("--processor %q: use pipeline, command or noop", f.processor)
}

func newPipeline(ctx context.Context, f workerFlags, b *broker.Backend, hub *live.Hub, log *slog.Logger) (worker.Processor, error) {
	projects, err := project.Open(ctx, b)
	if err != nil {
		return nil, err
	}
	threads, err := project.OpenThreads(ctx, b)
	if err != nil {
		return nil, err
	}
	target, err := preview.NewDir(preview.DirConfig{Root: f.previews, Port: f.previewPort, Domain: f.previewDomain, Logger: log})
	if err != nil {
		return nil, err
	}
	return pipeline.New(pipeline.Config{Projects: projects, Threads: threads, Workspaces: f.workspaces,
		State: f.state, Preview: target, BuildTimeout: f.buildTimeout, Logger: log, Live: hub.Writer,
		Sandbox: f.job.sb, JobEnv: f.job.vars})
}

func localWorkers(p *worker.Pool) func() []broker.WorkerInfo {
	if p == nil {
		return nil
	}
	return p.Status
}
