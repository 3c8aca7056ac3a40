package main

import (
	"context"
	"errors"

	"github.com/webordinary/webordinary/internal/app"
)

func runWorker(ctx context.Context, args []string) error {
	var nats string
	fs := newFlags("worker", "--nats URL [--config FILE] [flags]")
	fs.StringVar(&nats, "nats", "", "NATS server or cluster URL, e.g. nats://127.0.0.1:4222 (a serve's --nats-listen); or give --engine")
	p := newProcConfig(app.RoleWorker, fs)
	if err := p.parse(fs, args); err != nil {
		return err
	}
	url, err := engineURL(p.cfg.Engine, nats)
	if err != nil {
		return err
	}
	if url == "" {
		return errors.New("--nats or --engine is required: point it at a serve's --nats-listen address, your NATS cluster, or serve's aws:// URL")
	}
	p.cfg.Engine = url
	a, err := app.New(ctx, p.cfg)
	if err != nil {
		return p.explain(err)
	}
	return p.explain(a.Run(ctx))
}
