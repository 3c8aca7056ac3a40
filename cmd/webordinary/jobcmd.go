package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/webordinary/webordinary/internal/api"
)

// runJob is `webordinary job [interrupt] ID`: show a job (or wait for it), or interrupt it.
func runJob(ctx context.Context, args []string) error {
	var (
		cf      clientFlags
		wait    bool
		timeout time.Duration
	)
	fs := newFlags("job", "[--wait] ID | interrupt ID")
	cf.register(fs)
	fs.BoolVar(&wait, "wait", false, "wait until the job ends; exit status 1 unless done")
	fs.DurationVar(&timeout, "timeout", 10*time.Minute, "how long --wait waits")
	pos, err := parseWith(fs, args, 2)
	if err != nil {
		return err
	}
	interrupt := len(pos) == 2 && pos[0] == "interrupt"
	if len(pos) == 0 || (len(pos) == 2 && !interrupt) {
		return missing("job", "webordinary job 20260101-abc --wait", "the job id")
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	id := pos[len(pos)-1]
	switch {
	case interrupt:
		if err := c.Interrupt(ctx, id); err != nil {
			return explain(err)
		}
		fmt.Fprintf(os.Stderr, "asked the owner of job %s to stop it\n", id)
		return nil
	case wait:
		return waitAndPrint(ctx, c, cf.json, id, timeout)
	}
	rec, err := c.Job(ctx, id, 0)
	if err != nil {
		return explain(err)
	}
	if cf.json {
		return printJSON(rec)
	}
	printJob(os.Stdout, rec)
	return nil
}

// runHealth is `webordinary health`: exit 0 when serve and its engine answer (no token needed).
func runHealth(ctx context.Context, args []string) error {
	var (
		server  string
		timeout time.Duration
	)
	fs := newFlags("health", "[--server URL]")
	fs.StringVar(&server, "server", "http://127.0.0.1:8080", "URL of a running `webordinary serve`")
	fs.DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	if err := parse(fs, args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := api.NewClient(server, "").Health(ctx); err != nil {
		return explain(err)
	}
	fmt.Println("ok")
	return nil
}
