package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/webordinary/webordinary/internal/api"
	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/jobspec"
	jobreport "github.com/webordinary/webordinary/internal/pipeline/report"
	"github.com/webordinary/webordinary/internal/router"
)

func runSend(ctx context.Context, args []string) error {
	var (
		req     router.Request
		cf      clientFlags
		wait    bool
		timeout time.Duration
	)
	fs := newFlags("send", "--project P --user U [--wait] INSTRUCTION")
	cf.register(fs)
	fs.StringVar(&req.Project, "project", "", "project id")
	fs.StringVar(&req.User, "user", "", "user id")
	fs.StringVar(&req.Thread, "thread", "", "thread id (default: a new thread)")
	fs.StringVar(&req.Instruction, "instruction", "", "what to change (or as the argument); '-' reads it from stdin")
	fs.BoolVar(&wait, "wait", false, "wait for the result and print it; exit status 1 unless done")
	fs.DurationVar(&timeout, "timeout", 10*time.Minute, "how long --wait waits")
	pos, err := parseWith(fs, args, 1)
	if err != nil {
		return err
	}
	if err := sendRequest(&req, pos); err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	if _, err := c.Project(ctx, req.Project); err != nil {
		return explainProject(err, req.Project)
	}
	rec, err := c.Submit(ctx, req)
	if err != nil {
		return explain(err)
	}
	if !wait {
		return printAccepted(cf.json, rec)
	}
	fmt.Fprintf(os.Stderr, "job %s accepted for %s (thread %s); waiting for the result...\n", rec.Job.ID, rec.Job.Tenant, rec.Job.Thread)
	return waitAndPrint(ctx, c, cf.json, rec.Job.ID, timeout)
}

// sendRequest completes req from the positional argument and stdin, and checks it is whole.
func sendRequest(req *router.Request, pos []string) error {
	if len(pos) == 1 {
		req.Instruction = pos[0]
	}
	if req.Instruction == "-" {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return err
		}
		req.Instruction = string(b)
	}
	var absent []string
	for _, f := range []struct{ name, v string }{{"--project", req.Project}, {"--user", req.User}, {"the instruction", req.Instruction}} {
		if strings.TrimSpace(f.v) == "" {
			absent = append(absent, f.name)
		}
	}
	if len(absent) > 0 {
		return missing("send", `webordinary send --project my-site --user alice "make the header green"`, absent...)
	}
	return nil
}

// explainProject says what to do about a project that could not be read.
func explainProject(err error, id string) error {
	if errors.Is(err, api.ErrNotFound) {
		return fmt.Errorf("no project %q on this serve: add it first with `webordinary project add %s --repo URL` (see `webordinary project list`)", id, id)
	}
	return explain(err)
}

// waitAndPrint waits for a job's end, prints it and exits 1 unless it is done.
func waitAndPrint(ctx context.Context, c *api.Client, asJSON bool, id string, timeout time.Duration) error {
	rec, err := c.WaitJob(ctx, id, timeout)
	if err != nil {
		return explain(err)
	}
	if asJSON {
		err = printJSON(rec)
	} else {
		printJob(os.Stdout, rec)
	}
	if err == nil && rec.State != broker.StateDone {
		return exitError(1)
	}
	return err
}

func printAccepted(asJSON bool, rec broker.JobRecord) error {
	if asJSON {
		return printJSON(rec)
	}
	fmt.Printf("job %s %s for %s (thread %s)\nfollow it: webordinary job %s --wait\n",
		rec.Job.ID, stateColour(string(rec.State)), rec.Job.Tenant, rec.Job.Thread, rec.Job.ID)
	return nil
}

// printJob writes a job record for people: its state and, when final, its report.
func printJob(out io.Writer, rec broker.JobRecord) {
	fmt.Fprintf(out, "job %s %s", rec.Job.ID, stateColour(string(rec.State)))
	if res := rec.Result; res != nil {
		fmt.Fprintf(out, " in %s (attempt %d)", human(res.Duration), res.Attempt)
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	defer w.Flush()
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "  %s\t%s\n", k, v)
		}
	}
	line("tenant", fmt.Sprintf("%s (thread %s)", rec.Job.Tenant, rec.Job.Thread))
	line("asked", firstLineOf(jobspec.Of(rec.Job).Instruction, 70))
	if rec.Result == nil {
		line("last error", rec.LastError)
		return
	}
	printResult(line, *rec.Result)
}

func printResult(line func(k, v string), res broker.Result) {
	r := jobreport.Of(res)
	line("summary", firstLineOf(res.Summary, 200))
	if r.NoChanges {
		line("note", "no files changed, so nothing was committed")
	}
	line("error", res.Error)
	if k := r.Failure; k != "" {
		kind := string(k)
		if k.Operators() {
			kind += " (the operator's to fix)"
		}
		line("failure", kind)
	}
	if r.Commit != "" {
		line("commit", r.Commit[:min(len(r.Commit), 10)]+" on "+r.Branch)
	}
	for i, f := range r.Files {
		line(firstOnly(i, "files"), f.Status+" "+f.Path)
	}
	for i, u := range r.PreviewURLs {
		line(firstOnly(i, "preview"), u)
	}
	if r.AgentDurationMs > 0 {
		agent := human(time.Duration(r.AgentDurationMs) * time.Millisecond)
		if r.AgentTurns > 0 || r.AgentCostUSD > 0 {
			agent += fmt.Sprintf(", %d turns, $%.4f", r.AgentTurns, r.AgentCostUSD)
		}
		line("agent", agent)
	}
	if res.State != broker.StateDone && res.OutputTail != "" {
		line("output", firstLineOf(lastLines(res.OutputTail, 1), 200))
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// firstOnly labels the first line of a list.
func firstOnly(i int, label string) string {
	if i == 0 {
		return label
	}
	return ""
}

func firstLineOf(s string, n int) string {
	line, rest, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if len(line) > n {
		return line[:n-1] + "…"
	}
	if strings.TrimSpace(rest) != "" {
		return line + " …"
	}
	return line
}
