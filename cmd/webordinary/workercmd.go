package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/webordinary/webordinary/internal/live"
)

func runWorker(ctx context.Context, args []string) error {
	var (
		url, user, password string
		wf                  workerFlags
		lf                  logFlags
	)
	fs := newFlags("worker", "--nats URL [flags]")
	fs.StringVar(&url, "nats", "", "NATS server or cluster URL, e.g. nats://127.0.0.1:4222 (a serve's --nats-listen)")
	fs.StringVar(&user, "nats-user", "", "NATS user")
	fs.StringVar(&password, "nats-password", "", "NATS password")
	wf.register(fs, 1)
	lf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if url == "" {
		return errors.New("--nats is required: point it at a serve's --nats-listen address or your NATS cluster")
	}
	wf.defaults(".webordinary")
	log, err := lf.logger(os.Stderr)
	if err != nil {
		return err
	}
	eng, err := connectEngine(ctx, url, user, password)
	if err != nil {
		return err
	}
	defer eng.close()
	pool, err := newPool(ctx, ".webordinary", wf, eng.backend, live.NewHub(0), log)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "webordinary worker: %d workers on %s (processor %s)\n", wf.workers, eng.describe, wf.processor)
	return pool.Run(ctx)
}
