package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/router"
)

func runSend(ctx context.Context, args []string) error {
	var (
		req     router.Request
		srv     string
		wait    bool
		timeout time.Duration
	)
	fs := newFlags("send", "--project P --user U --instruction TEXT [--wait]")
	fs.StringVar(&srv, "server", "http://127.0.0.1:8080", "URL of a running `webordinary serve`")
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
	rec, err := postJob(ctx, srv, req)
	if err != nil {
		return err
	}
	if !wait {
		return printJSON(rec)
	}
	fmt.Fprintf(os.Stderr, "job %s accepted for %s (thread %s); waiting...\n", rec.Job.ID, rec.Job.Tenant, rec.Job.Thread)
	rec, err = waitJob(ctx, srv, rec.Job.ID, timeout)
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

func postJob(ctx context.Context, srv string, req router.Request) (broker.JobRecord, error) {
	body, _ := json.Marshal(req)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(srv, "/")+"/api/jobs", bytes.NewReader(body))
	if err != nil {
		return broker.JobRecord{}, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	var rec broker.JobRecord
	return rec, doJSON(hreq, http.StatusAccepted, &rec)
}

func waitJob(ctx context.Context, srv, id string, timeout time.Duration) (broker.JobRecord, error) {
	deadline := time.Now().Add(timeout)
	for {
		step := min(time.Until(deadline), 60*time.Second)
		url := fmt.Sprintf("%s/api/jobs/%s?wait=%s", strings.TrimRight(srv, "/"), id, step.Round(time.Second))
		hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return broker.JobRecord{}, err
		}
		var rec broker.JobRecord
		if err := doJSON(hreq, http.StatusOK, &rec); err != nil {
			return rec, err
		}
		if rec.State.Final() || time.Now().After(deadline) {
			return rec, nil
		}
	}
}

func doJSON(req *http.Request, want int, out any) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%w (is `webordinary serve` running at that address? set --server)", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		var e struct{ Error string }
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s", e.Error)
		}
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(body))
	}
	return json.Unmarshal(body, out)
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
