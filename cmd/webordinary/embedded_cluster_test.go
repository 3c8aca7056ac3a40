package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/natsjs"
	"github.com/webordinary/webordinary/internal/broker/natsjs/natsjstest"
	"github.com/webordinary/webordinary/internal/router"
)

// TestServesFormAnEmbeddedCluster is docs/SCALING.md's cluster without nats-server: three serve
// processes whose embedded engines are members of one cluster, each with workers of its own.
// A job accepted by one serve is run and seen through another; after one serve is killed
// (SIGKILL), the other two still accept and run jobs.
func TestServesFormAnEmbeddedCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("three serve processes")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	agent := `echo "did: $WO_INSTRUCTION"`
	ports := natsjstest.FreeAddrs(t, 3) // routes: the members must know each other's before any starts
	serves := make([]*cluster, 3)
	for i := range serves {
		c := &cluster{t: t, dir: reachableTempDir(t), agent: agent, sandbox: "auto"}
		engine := natsjs.EmbeddedURL(filepath.Join(c.dir, "nats")) +
			fmt.Sprintf("?cluster=wo&cluster_listen=%s&routes=%s", ports[i], strings.Join(ports, ","))
		cmd := exec.Command(os.Args[0], "serve", "--data", c.data(), "--http", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0",
			"--engine", engine, "--ready-file", filepath.Join(c.dir, "ready.json"), "--workers", "1",
			// The defaults a user gets (fsync on, 15 s leases, the default sandbox), but for
			// addresses, which must not be fixed ports in a test, and the agent.
			"--set", "worker.processor=command", "--set", "worker.agent_command="+agent, "--preview", "", "--log-level", "warn",
			"--smtp", "", "--set", "worker.workspaces="+filepath.Join(c.dir, "workspaces"))
		cmd.Env = append(c.env(), "WO_NATS_USER=wo", "WO_NATS_PASSWORD=the same long secret on every member")
		c.serveP = c.startCmd(cmd)
		t.Cleanup(c.stopAll)
		serves[i] = c
	}
	started := time.Now()
	for _, c := range serves {
		c.api, c.nats = waitReadyWithin(t, filepath.Join(c.dir, "ready.json"), time.Minute)
	}
	t.Logf("three serves ready in %s", time.Since(started).Round(time.Millisecond))
	// run submits through via (again with the same id while the engine refuses: idempotent)
	// and waits until the job is done, as seen through seen.
	run := func(via, seen *cluster, user string, within time.Duration) error {
		req := router.Request{JobID: broker.NewJobID(), Project: "site", User: user, Thread: "t", Instruction: "hello " + user}
		rctx, rcancel := context.WithTimeout(ctx, within)
		defer rcancel()
		for {
			_, err := via.client().Submit(rctx, req)
			if err == nil {
				break
			}
			if rctx.Err() != nil {
				return fmt.Errorf("submit through %s: %w", via.api, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
		var last error
		for rctx.Err() == nil {
			rec, err := seen.client().WaitJob(rctx, req.JobID, 5*time.Second)
			if err == nil && rec.State == broker.StateDone {
				return nil
			}
			last = fmt.Errorf("%s, %v", rec.State, err)
		}
		return fmt.Errorf("job %s accepted through %s, seen through %s: %v", req.JobID, via.api, seen.api, last)
	}
	if err := run(serves[0], serves[2], "a", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	_ = serves[0].serveP.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	if err := run(serves[1], serves[2], "b", time.Minute); err != nil {
		t.Fatalf("after one serve of three was killed: %v", err)
	}
	t.Logf("a job submitted to serve 2 right after serve 1 was killed was done %s after the kill", time.Since(killed).Round(time.Millisecond))
}
