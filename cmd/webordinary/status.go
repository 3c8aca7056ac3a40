package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/webordinary/webordinary/internal/api"
	"github.com/webordinary/webordinary/internal/jobspec"
)

func runStatus(ctx context.Context, args []string) error {
	var (
		cf      clientFlags
		timeout = 10 * time.Second
	)
	fs := newFlags("status", "[--json]")
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := cf.client()
	if err != nil {
		return err
	}
	st, err := c.Status(ctx)
	if err != nil {
		return explain(err)
	}
	if cf.json {
		return printJSON(st)
	}
	printStatus(os.Stdout, st)
	return nil
}

// printStatus writes the status as tables, each section only when it has rows.
func printStatus(out io.Writer, st api.Status) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	defer w.Flush()
	fmt.Fprintf(w, "WORKERS (%d)\tSTATE\tTENANT\tJOB\tSANDBOX\n", len(st.Workers))
	for _, wk := range st.Workers {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", wk.ID, wk.State, dash(wk.Tenant), dash(wk.JobID), dash(wk.Sandbox))
	}
	if len(st.Leases) > 0 {
		fmt.Fprintf(w, "\nLEASES (%d)\tOWNER\tTOKEN\tHELD\tEXPIRES IN\n", len(st.Leases))
		for _, l := range st.Leases {
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", l.Tenant, l.Owner, l.Token, human(l.Age), human(l.ExpiresIn))
		}
	}
	if len(st.Pending) > 0 || st.ClaimsWaiting > 0 {
		fmt.Fprintf(w, "\nPENDING (%d tenants, %d claim requests)\tJOBS\tOWNER\t\t\n", len(st.Pending), st.ClaimsWaiting)
		for _, p := range st.Pending {
			fmt.Fprintf(w, "%s\t%d\t%s\t\t\n", p.Tenant, p.Pending, dash(p.Owner))
		}
	}
	if len(st.HeldMail) > 0 {
		fmt.Fprintf(w, "\nHELD MAIL (%d; webordinary mail held)\tFROM\tRECEIVED\tSUBJECT\t\n", len(st.HeldMail))
		for _, m := range st.HeldMail {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t\n", m.ID, dash(m.From), ago(m.ReceivedAt), firstLineOf(m.Subject, 40))
		}
	}
	if st.ParkedReplies > 0 {
		fmt.Fprintf(w, "\nPARKED REPLIES: %d could not be sent; see webordinary mail replies\t\t\t\t\t\n", st.ParkedReplies)
	}
	fmt.Fprintf(w, "\nRECENT JOBS (%d)\t%s\tTENANT\tTOOK\tACCEPTED\tINSTRUCTION\n", len(st.Jobs), paint("01", "STATE")) // same escape length as the states
	for _, j := range st.Jobs {
		took := "-"
		switch {
		case j.Result != nil:
			took = human(j.Result.Duration)
		case !j.BusySince.IsZero(): // the operator sees it waits, not only the WARN line
			took = "model busy " + human(time.Since(j.BusySince))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", j.Job.ID, stateColour(string(j.State)), j.Job.Tenant, took,
			ago(j.Job.AcceptedAt), firstLineOf(jobspec.Of(j.Job).Instruction, 40))
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
