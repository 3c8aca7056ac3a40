package dashboard

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/webordinary/webordinary/internal/api"
	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// overviewData is what the overview shows.
type overviewData struct {
	Workers       []workerRow
	Tenants       []tenantRow
	ClaimsWaiting int
	Jobs          []broker.JobRecord
	// Problem says why the status could not be read; the rest is then empty.
	Problem string
}

// workerRow is one worker with its heartbeat age in whole seconds.
type workerRow struct {
	broker.WorkerInfo
	Age   time.Duration
	Stale bool
}

// tenantRow is one tenant seen in a lease, a pending queue or a recent job.
type tenantRow struct {
	ID      tenant.ID
	Owner   string
	Token   uint64
	Pending int
	// Oldest is when the oldest waiting job among the recent ones was accepted (zero: none).
	Oldest time.Time
	// LastActivity is the latest acceptance, start or end among the tenant's recent jobs.
	LastActivity time.Time
	// Running is the id of the tenant's running job, if any.
	Running string
}

// Waiting reports a tenant with work and no owner: a claim should be on its way.
func (t tenantRow) Waiting() bool { return t.Owner == "" && t.Pending > 0 }

// staleAfter marks a heartbeat old enough to look at.
const staleAfter = 30 * time.Second

func (d *Dashboard) readOverview(ctx context.Context) overviewData {
	st, err := api.ReadStatus(ctx, d.b, recentJobs, d.cfg.Local)
	if err != nil {
		return overviewData{Problem: "status unavailable: " + err.Error()}
	}
	now := time.Now()
	data := overviewData{ClaimsWaiting: st.ClaimsWaiting, Jobs: st.Jobs, Tenants: tenantRows(st)}
	for _, w := range st.Workers {
		age := max(now.Sub(w.Heartbeat), 0).Truncate(time.Second)
		data.Workers = append(data.Workers, workerRow{WorkerInfo: w, Age: age, Stale: age > staleAfter})
	}
	return data
}

// tenantRows joins leases, pending counts and recent jobs per tenant.
func tenantRows(st api.Status) []tenantRow {
	ix := tenantIndex{}
	for _, l := range st.Leases {
		r := ix.row(l.Tenant)
		r.Owner, r.Token = l.Owner, l.Token
	}
	for _, p := range st.Pending {
		ix.row(p.Tenant).Pending = p.Pending
	}
	for _, j := range st.Jobs {
		ix.row(j.Job.Tenant.String()).see(j)
	}
	return ix.sorted()
}

// tenantIndex collects rows by tenant name.
type tenantIndex map[string]*tenantRow

// row returns name's row, made on first use; a name that does not parse gets a row that
// is not kept.
func (ix tenantIndex) row(name string) *tenantRow {
	if r := ix[name]; r != nil {
		return r
	}
	t, err := tenant.Parse(name)
	if err != nil {
		return &tenantRow{}
	}
	ix[name] = &tenantRow{ID: t}
	return ix[name]
}

// sorted lists active tenants (owned, running or with work) first, each group by name,
// so rows stay put as things change.
func (ix tenantIndex) sorted() []tenantRow {
	out := make([]tenantRow, 0, len(ix))
	for _, r := range ix {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b tenantRow) int {
		return cmp.Or(cmp.Compare(a.idle(), b.idle()), cmp.Compare(a.ID.String(), b.ID.String()))
	})
	return out
}

// see folds one recent job into the tenant's row.
func (t *tenantRow) see(j broker.JobRecord) {
	for _, at := range []time.Time{j.Job.AcceptedAt, j.StartedAt, j.FinishedAt} {
		if at.After(t.LastActivity) {
			t.LastActivity = at
		}
	}
	switch j.State {
	case broker.StateQueued, broker.StateClaimed:
		if t.Oldest.IsZero() || j.Job.AcceptedAt.Before(t.Oldest) {
			t.Oldest = j.Job.AcceptedAt
		}
	case broker.StateRunning:
		t.Running = j.Job.ID
	}
}

func (t tenantRow) idle() int {
	if t.Owner != "" || t.Pending > 0 || t.Running != "" {
		return 0
	}
	return 1
}

// overviewSections renders the overview's live sections for the feed, by element id.
func (d *Dashboard) overviewSections(ctx context.Context) map[string]string {
	data := d.readOverview(ctx)
	v := &view{CSRF: d.csrf, Back: "/", Data: data}
	ids := []string{"problem", "workers", "tenants", "jobs"}
	if data.Problem != "" {
		ids = ids[:1] // keep showing the last good state under the problem
	}
	out := map[string]string{}
	for _, id := range ids {
		html, err := d.pages.render("overview", id, v)
		if err != nil {
			d.log.ErrorContext(ctx, "render overview", "section", id, "err", err)
			continue
		}
		out[id] = html
	}
	return out
}

func (d *Dashboard) overview(w http.ResponseWriter, r *http.Request) {
	v := &view{Title: "Overview", Nav: "overview", Events: "/events", Back: "/", Data: d.readOverview(r.Context())}
	d.write(w, r, http.StatusOK, "overview", v)
}
