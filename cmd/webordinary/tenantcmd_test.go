package main

import (
	"strings"
	"testing"
)

// TestTenantCommands: `tenant claim` and `tenant release [--force]` against a real serve say
// what they did; a tenant that is not PROJECT/USER is refused with an example.
func TestTenantCommands(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "true", 1)
	if out := c.cli(t, "tenant", "claim", "--server", c.api, "site/alice"); !strings.Contains(out, "requested a claim for site/alice") {
		t.Errorf("tenant claim:\n%s", out)
	}
	if out := c.cli(t, "tenant", "release", "--server", c.api, "--force", "site/alice"); !strings.Contains(out, "site/alice had no live owner") {
		t.Errorf("tenant release --force:\n%s", out)
	}
	if out := c.cli(t, "tenant", "release", "--server", c.api, "site/alice"); !strings.Contains(out, "asked site/alice's owner") {
		t.Errorf("tenant release:\n%s", out)
	}
	c.fails(t, "want PROJECT/USER", "tenant", "claim", "--server", c.api, "site")
}
