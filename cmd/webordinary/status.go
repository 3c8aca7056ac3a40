package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"text/tabwriter"
	"time"

	"github.com/webordinary/webordinary/internal/api"
)

func runStatus(ctx context.Context, args []string) error {
	var (
		cf      clientFlags
		asJSON  bool
		timeout = 10 * time.Second
	)
	fs := newFlags("status", "[--json]")
	cf.register(fs)
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := cf.client()
	if err != nil {
		return err
	}
	var st api.Status
	if err := c.call(ctx, http.MethodGet, "/api/status", nil, http.StatusOK, &st); err != nil {
		return err
	}
	if asJSON {
		return printJSON(st)
	}
	printStatus(st)
	return nil
}

func printStatus(st api.Status) {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	defer w.Flush()
	fmt.Fprintf(w, "LEASES (%d)\tOWNER\tTOKEN\tAGE\tEXPIRES IN\n", len(st.Leases))
	for _, l := range st.Leases {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", l.Tenant, l.Owner, l.Token, l.Age, l.ExpiresIn)
	}
	fmt.Fprintf(w, "\nPENDING (%d tenants, %d claim requests waiting)\tJOBS\tOWNER\t\t\n", len(st.Pending), st.ClaimsWaiting)
	for _, p := range st.Pending {
		fmt.Fprintf(w, "%s\t%d\t%s\t\t\n", p.Tenant, p.Pending, p.Owner)
	}
	fmt.Fprintf(w, "\nWORKERS (%d)\tSTATE\tTENANT\tJOB\tTOKEN\n", len(st.Workers))
	for _, wk := range st.Workers {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\n", wk.ID, wk.State, wk.Tenant, wk.JobID, wk.LeaseToken)
	}
	fmt.Fprintf(w, "\nRECENT JOBS\tSTATE\tTENANT\tATTEMPTS\tINSTRUCTION\n")
	for _, j := range st.Jobs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%.50q\n", j.Job.ID, j.State, j.Job.Tenant, j.Attempts, j.Job.Instruction)
	}
}
