package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/router"
)

func runSend(ctx context.Context, args []string) error {
	var (
		req     router.Request
		cf      clientFlags
		wait    bool
		timeout time.Duration
	)
	fs := newFlags("send", "--project P --user U --instruction TEXT [--wait]")
	cf.register(fs)
	fs.StringVar(&req.Project, "project", "", "project id")
	fs.StringVar(&req.User, "user", "", "user id")
	fs.StringVar(&req.Thread, "thread", "", "thread id (default: a new thread)")
	fs.StringVar(&req.Instruction, "instruction", "", "what to change; '-' reads it from stdin")
	fs.BoolVar(&wait, "wait", false, "wait for the result and print it; exit status 1 unless done")
	fs.DurationVar(&timeout, "timeout", 10*time.Minute, "how long --wait waits")
	if err := parse(fs, args); err != nil {
		return err
	}
	if req.Instruction == "-" {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return err
		}
		req.Instruction = string(b)
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	rec, err := postJob(ctx, c, req)
	if err != nil {
		return err
	}
	if !wait {
		return printJSON(rec)
	}
	fmt.Fprintf(os.Stderr, "job %s accepted for %s (thread %s); waiting...\n", rec.Job.ID, rec.Job.Tenant, rec.Job.Thread)
	rec, err = waitJob(ctx, c, rec.Job.ID, timeout)
	if err != nil {
		return err
	}
	if err := printJSON(rec); err != nil {
		return err
	}
	if rec.State != broker.StateDone {
		return exitError(1)
	}
	return nil
}

func postJob(ctx context.Context, c *apiClient, req router.Request) (broker.JobRecord, error) {
	var rec broker.JobRecord
	return rec, c.call(ctx, http.MethodPost, "/api/jobs", req, http.StatusAccepted, &rec)
}

func waitJob(ctx context.Context, c *apiClient, id string, timeout time.Duration) (broker.JobRecord, error) {
	deadline := time.Now().Add(timeout)
	for {
		step := min(time.Until(deadline), 60*time.Second)
		path := fmt.Sprintf("/api/jobs/%s?wait=%s", url.PathEscape(id), step.Round(time.Second))
		var rec broker.JobRecord
		if err := c.call(ctx, http.MethodGet, path, nil, http.StatusOK, &rec); err != nil {
			return rec, err
		}
		if rec.State.Final() || time.Now().After(deadline) {
			return rec, nil
		}
	}
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
