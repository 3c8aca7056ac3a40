package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/webordinary/webordinary/internal/api"
	"github.com/webordinary/webordinary/internal/tenant"
)

// runTenant is `webordinary tenant claim|release [--force] PROJECT/USER`: an operator's nudge
// for one tenant (project+user).
func runTenant(ctx context.Context, args []string) error {
	var (
		cf    clientFlags
		force bool
	)
	fs := newFlags("tenant", "claim PROJECT/USER | release [--force] PROJECT/USER")
	cf.register(fs)
	fs.BoolVar(&force, "force", false, "release: take the lease from its owner at once (a hung worker; it is fenced off) instead of asking it to release after its job")
	pos, err := parseWith(fs, args, 2)
	if err != nil {
		return err
	}
	if len(pos) != 2 || (pos[0] != "claim" && pos[0] != "release") {
		return missing("tenant", "webordinary tenant release --force bakery/owner", "claim or release", "the tenant (PROJECT/USER)")
	}
	t, err := parseTenant(pos[1])
	if err != nil {
		return usageError{"tenant", err}
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	a, err := tenantAction(ctx, c, pos[0], t, force)
	if err != nil {
		return explain(err)
	}
	if cf.json {
		return printJSON(a)
	}
	fmt.Println(describeTenantAction(a))
	return nil
}

func tenantAction(ctx context.Context, c *api.Client, action string, t tenant.ID, force bool) (api.TenantAction, error) {
	if action == "claim" {
		return c.ClaimTenant(ctx, t)
	}
	return c.ReleaseTenant(ctx, t, force)
}

func parseTenant(s string) (tenant.ID, error) {
	p, u, ok := strings.Cut(s, "/")
	if !ok {
		return tenant.ID{}, fmt.Errorf("tenant %q: want PROJECT/USER, e.g. bakery/owner", s)
	}
	return tenant.New(p, u)
}

func describeTenantAction(a api.TenantAction) string {
	switch {
	case a.Action == "claim":
		return "requested a claim for " + a.Tenant + " (a worker takes it if it has pending jobs and no live owner)"
	case a.Action == "force-release" && a.Took:
		return "took " + a.Tenant + "'s lease from its owner; a claim is requested"
	case a.Action == "force-release":
		return a.Tenant + " had no live owner; a claim is requested"
	}
	return "asked " + a.Tenant + "'s owner to release it after its running job"
}
