package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// TestForceReleaseAndClaim: a tenant whose owner hangs (its lease live for an hour, nothing
// running) shows Force release; it takes the lease and a worker runs the waiting job. A
// tenant with pending jobs and no owner shows Claim, which requests a claim.
func TestForceReleaseAndClaim(t *testing.T) {
	t.Parallel()
	f := setup(t, options{})
	ctx := context.Background()
	tn, _ := tenant.New("site", "alice")
	if _, err := f.env.Backend.Leases.Acquire(ctx, tn, "hung-worker", time.Hour); err != nil {
		t.Fatal(err)
	}
	rec := f.submit("alice", "green header")
	eventually(t, 10*time.Second, "a Force release button", func() bool {
		_, body := f.get("/")
		return strings.Contains(body, "Force release</button>")
	})
	token := f.csrf("/")
	if res, body := f.post("/tenants/site/alice/force-release", url.Values{"csrf": {token}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("force release: %s\n%s", res.Status, body)
	}
	f.waitState(rec.Job.ID, broker.StateDone)
	if res, body := f.post("/tenants/site/alice/claim", url.Values{"csrf": {token}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("claim: %s\n%s", res.Status, body)
	}
	if res, _ := f.post("/tenants/site/Not_Valid/claim", url.Values{"csrf": {token}}); res.StatusCode != http.StatusBadRequest {
		t.Errorf("claim of an invalid tenant: %s", res.Status)
	}
}
