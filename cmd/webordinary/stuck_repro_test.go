package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
)

// stuckRepro is the data dir of issue 24's stuck tenant, kept beside the repository (not in
// it): ../shared/repro from the worktree.
var stuckRepro = filepath.Join("..", "..", "..", "shared", "repro", "stuck-tenant-data.tar.gz")

// TestTheStuckTenantReproIsClaimed starts serve on the repro's data dir, where cafe/owner had
// 2 pending jobs that no worker ever claimed (an expired lease record the engine kept), with a
// reconcile period of an hour: the start-up pass alone gets both done. Skipped without the
// repro; TestATenantBehindAnExpiredLeaseTheEngineKeptIsClaimed (internal/worker) builds the
// same state itself.
func TestTheStuckTenantReproIsClaimed(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(stuckRepro); err != nil {
		t.Skipf("no repro data dir here (%v)", err)
	}
	c := &cluster{t: t, dir: reachableTempDir(t), agent: "true", sandbox: "off"}
	if out, err := exec.Command("tar", "xzf", stuckRepro, "-C", c.dir).CombinedOutput(); err != nil {
		t.Fatalf("extract the repro: %v\n%s", err, out)
	}
	ready := filepath.Join(c.dir, "ready.json")
	c.serveP = c.start("serve", "--data", c.data(), "--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0",
		"--ready-file", ready, "--workers", "4", "--set", "worker.processor=command", "--set", "worker.agent_command="+c.agent,
		"--sandbox", c.sandbox, "--set", "serve.reconcile=1h", "--preview", "", "--smtp", "", "--log-level", "warn")
	t.Cleanup(c.stopAll)
	c.api, c.nats = waitReady(t, ready)
	ctx := context.Background()
	for _, id := range []string{"j18ebc6d8de55d3cc2815a8ec", "j18ebc71519d479daa68c3765"} {
		if rec := c.job(ctx, id, 30*time.Second); rec.State != broker.StateDone {
			t.Errorf("job %s of the stuck tenant: %s (%s)", id, rec.State, rec.LastError)
		}
	}
}
