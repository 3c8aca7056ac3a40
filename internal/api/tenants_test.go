package api_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/api"
	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/tenant"
)

// TestOperatorTakesAHungOwnersTenant: a tenant whose owner hangs (its lease renewed for an
// hour, nothing running) waits; the operator's force release takes the lease and a worker
// runs the job. A claim request is accepted any time; a bad tenant is a 400.
func TestOperatorTakesAHungOwnersTenant(t *testing.T) {
	t.Parallel()
	c, env := setupEnv(t)
	ctx := context.Background()
	tn, _ := tenant.New("site", "alice")
	if _, err := env.Backend.Leases.Acquire(ctx, tn, "hung-worker", time.Hour); err != nil {
		t.Fatal(err)
	}
	rec, err := c.Submit(ctx, router.Request{Project: "site", User: "alice", Instruction: "green header"})
	if err != nil {
		t.Fatal(err)
	}
	if a, err := c.ClaimTenant(ctx, tn); err != nil || a.Action != "claim" {
		t.Fatalf("claim: %+v %v", a, err)
	}
	if got, _ := c.Job(ctx, rec.Job.ID, 0); got.State.Final() {
		t.Fatalf("the job ran under a hung owner's lease: %+v", got)
	}
	a, err := c.ReleaseTenant(ctx, tn, true)
	if err != nil || !a.Took || a.Action != "force-release" {
		t.Fatalf("force release: %+v %v", a, err)
	}
	if done, err := c.WaitJob(ctx, rec.Job.ID, 30*time.Second); err != nil || done.State != broker.StateDone {
		t.Fatalf("job after the force release: %+v %v", done, err)
	}
	if _, err := c.ReleaseTenant(ctx, tn, false); err != nil {
		t.Fatalf("polite release: %v", err)
	}
	var bad *api.Error
	if _, err := c.ClaimTenant(ctx, tenant.ID{Project: "Bad!", User: "x"}); !errors.As(err, &bad) || bad.Status != http.StatusBadRequest {
		t.Fatalf("claim for a bad tenant: %v, want a 400", err)
	}
}
