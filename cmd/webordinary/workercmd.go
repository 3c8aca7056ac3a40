package main

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"os"
	"strings"

	"github.com/webordinary/webordinary/internal/live"
)

func runWorker(ctx context.Context, args []string) error {
	var (
		url, user, password, data string
		wf                        workerFlags
		lf                        logFlags
	)
	fs := newFlags("worker", "--nats URL [flags]")
	fs.StringVar(&url, "nats", "", "NATS server or cluster URL, e.g. nats://127.0.0.1:4222 (a serve's --nats-listen)")
	fs.StringVar(&user, "nats-user", "", "NATS user (default: the URL's, else <data>/secrets/nats.json when present)")
	fs.StringVar(&password, "nats-password", "", "NATS password")
	fs.StringVar(&data, "data", ".webordinary", "data directory: default root of the directories below, and of secrets/nats.json (serve's engine credentials)")
	wf.register(fs, 1)
	lf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if url == "" {
		return errors.New("--nats is required: point it at a serve's --nats-listen address or your NATS cluster")
	}
	wf.defaults(data)
	log, err := lf.logger(os.Stderr)
	if err != nil {
		return err
	}
	if user == "" && password == "" && !hasUserInfo(url) {
		c, _, err := readNATSCreds(data)
		if err != nil {
			return err
		}
		user, password = c.User, c.Password
	}
	eng, err := connectEngine(ctx, url, user, password)
	if err != nil {
		return err
	}
	defer eng.close()
	pool, err := newPool(ctx, data, wf, eng.backend, live.NewHub(0), log)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "webordinary worker: %d workers on %s (processor %s)\n  sandbox: %s\n", wf.workers, eng.describe, wf.processor, wf.job.describe())
	return pool.Run(ctx)
}

// hasUserInfo reports whether a NATS URL (or the first of several) carries credentials.
func hasUserInfo(urls string) bool {
	first, _, _ := strings.Cut(urls, ",")
	u, err := neturl.Parse(strings.TrimSpace(first))
	return err == nil && u.User != nil
}
