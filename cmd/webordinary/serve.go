package main

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/webordinary/webordinary/internal/app"
	"github.com/webordinary/webordinary/internal/router"
)

// serveFlags are serve's flags: an app.Config and the flags that map onto it.
type serveFlags struct {
	cfg          app.Config
	engine, nats string
	listenSet    bool // --nats-listen given
	domains      string
	logFlags
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
	f := &serveFlags{cfg: app.Config{Role: app.RoleServe}}
	c := &f.cfg
	fs := newFlags("serve", "[flags]")
	fs.StringVar(&c.Data, "data", "", dataUsage)
	fs.StringVar(&c.HTTPAddr, "http", app.DefaultHTTPAddr, "HTTP API address")
	fs.StringVar(&c.PreviewAddr, "preview", app.DefaultPreviewAddr, "preview server address (http://edit.<project>.localhost:<port>/); empty = none")
	fs.StringVar(&f.engine, "engine", "", "the engine's URL: embedded:///abs/dir (an engine in this process; default embedded://<data>/nats), nats://host:4222[,nats://host2:4222] (an external NATS server or cluster) or aws://?region=R&prefix=P (SQS, DynamoDB and S3)")
	fs.StringVar(&f.nats, "nats", "", "use this external NATS server or cluster instead of the embedded engine (same as --engine nats://…)")
	fs.StringVar(&c.EngineListen, "nats-listen", app.DefaultEngineListen, "where the embedded engine accepts other worker processes; empty = in-process only")
	fs.StringVar(&c.EngineUser, "nats-user", "", "engine user (default: generated once into <data>/secrets/nats.json for the embedded engine)")
	fs.StringVar(&c.EnginePassword, "nats-password", "", "engine password (with --nats-user)")
	fs.BoolVar(&c.NoSync, "no-sync", false, "do not fsync every write (faster; a power loss may lose the last accepted jobs)")
	fs.DurationVar(&c.ReconcileEvery, "reconcile", router.DefaultReconcileEvery, "reconciler period")
	fs.StringVar((*string)(&c.InterruptPolicy), "interrupt-policy", string(router.PolicyInterrupt), "what a new instruction on a thread does to that thread's running job, for projects that do not set their own: interrupt or queue (another thread's instruction always waits)")
	fs.StringVar(&c.PublicURL, "public-url", "", "the dashboard's address as people reach it, for the signed publish links in replies; its host is the only non-loopback Host name the dashboard and API answer to (default http://<--http>)")
	fs.StringVar(&c.Token, "dashboard-token", "", "token required by the dashboard and API (default: generated once into <data>/secrets/api-token)")
	fs.StringVar(&c.ReadyFile, "ready-file", "", "when ready, write {\"api\":URL,\"nats\":URL} to this file (for scripts and supervisors)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", app.DefaultShutdownTimeout, "bound on the whole shutdown (at least --shutdown-grace + 5s)")
	registerWorker(fs, &c.Worker, app.DefaultServeWorkers)
	f.logFlags.register(fs)
	registerMail(fs, &c.Mail, &f.domains)
	registerAWS(fs, &c.AWS)
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	f.listenSet = isSet(fs, "nats-listen")
	return f, nil
}

// config is the app.Config the flags say.
func (f *serveFlags) config() (app.Config, error) {
	c := f.cfg
	c.Mail.Domains = splitList(f.domains)
	engine, err := engineURL(f.engine, f.nats)
	if err != nil {
		return c, err
	}
	c.Engine = engine
	if engine != "" && !strings.HasPrefix(engine, "embedded://") && !f.listenSet {
		c.EngineListen = "" // only the embedded engine listens
	}
	log, err := f.logger(os.Stderr)
	if err != nil {
		return c, err
	}
	c.Logger, c.Banner = log, os.Stderr
	return c, nil
}

// engineURL is --engine, else --nats (a bare host:port is a nats:// one).
func engineURL(engine, nats string) (string, error) {
	switch {
	case engine != "" && nats != "":
		return "", errors.New("give --engine or --nats, not both")
	case nats != "" && !strings.Contains(nats, "://"):
		return "nats://" + nats, nil
	case nats != "":
		return nats, nil
	}
	return engine, nil
}

func (f *serveFlags) run(ctx context.Context) error {
	cfg, err := f.config()
	if err != nil {
		return err
	}
	a, err := app.New(ctx, cfg)
	if err != nil {
		return asFlags(err)
	}
	return asFlags(a.Run(ctx))
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, d := range strings.Split(s, ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, d)
		}
	}
	return out
}
