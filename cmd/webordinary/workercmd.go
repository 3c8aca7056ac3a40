package main

import (
	"context"
	"errors"
	"os"

	"github.com/webordinary/webordinary/internal/app"
)

func runWorker(ctx context.Context, args []string) error {
	var (
		cfg          = app.Config{Role: app.RoleWorker}
		engine, nats string
		lf           logFlags
	)
	fs := newFlags("worker", "--nats URL [flags]")
	fs.StringVar(&nats, "nats", "", "NATS server or cluster URL, e.g. nats://127.0.0.1:4222 (a serve's --nats-listen)")
	fs.StringVar(&engine, "engine", "", "the engine's URL instead of --nats (any scheme broker.Open knows, e.g. nats://host:4222 or aws://?region=R&prefix=P)")
	fs.StringVar(&cfg.EngineUser, "nats-user", "", "engine user (default: the URL's, else <data>/secrets/nats.json when present)")
	fs.StringVar(&cfg.EnginePassword, "nats-password", "", "engine password")
	fs.StringVar(&cfg.Data, "data", "", dataUsage+"; also where secrets/nats.json (serve's engine credentials) is read from")
	registerWorker(fs, &cfg.Worker, app.DefaultWorkerWorkers)
	fs.DurationVar(&cfg.Worker.IdleExit, "idle-exit", 0, "exit (status 0) once every worker found nothing to do for this long, so the platform's scaler can scale to zero; 0 = never")
	registerAWS(fs, &cfg.AWS)
	lf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	url, err := engineURL(engine, nats)
	if err != nil {
		return err
	}
	if url == "" {
		return errors.New("--nats or --engine is required: point it at a serve's --nats-listen address, your NATS cluster, or serve's aws:// URL")
	}
	cfg.Engine = url
	if cfg.Logger, err = lf.logger(os.Stderr); err != nil {
		return err
	}
	cfg.Banner = os.Stderr
	a, err := app.New(ctx, cfg)
	if err != nil {
		return asFlags(err)
	}
	return asFlags(a.Run(ctx))
}
