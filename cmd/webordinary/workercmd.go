package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	if wf.workspaces == "" {
		wf.workspaces = filepath.Join(".webordinary", "workspaces")
	}
	log, err := lf.logger(os.Stderr)
	if err != nil {
		return err
	}
	eng, err := connectEngine(ctx, url, user, password)
	if err != nil {
		return err
	}
	defer eng.close()
	pool, err := newPool(wf, eng.backend, log)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "webordinary worker: %d workers on %s running %q\n", wf.workers, eng.describe, wf.agentCommand)
	return pool.Run(ctx)
}
