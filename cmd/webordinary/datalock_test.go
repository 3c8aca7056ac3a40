package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSecondServeOnADataDirExits: a second serve on a running one's data directory (its own
// free ports) exits at once, naming the first's pid; the first goes on serving.
func TestSecondServeOnADataDirExits(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "true", 0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	second := exec.CommandContext(ctx, os.Args[0], "serve", "--data", c.data(), "--http", "127.0.0.1:0",
		"--nats-listen", "127.0.0.1:0", "--ready-file", filepath.Join(c.dir, "second-ready.json"), "--workers", "0",
		"--preview", "", "--smtp", "", "--set", "engine.no_sync=true", "--log-level", "warn")
	second.Env, second.Dir = c.env(), c.dir
	out, err := second.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the second serve kept running on the first's data directory; its output:\n%s", out)
	}
	if err == nil {
		t.Fatalf("the second serve exited without an error:\n%s", out)
	}
	pid := fmt.Sprint(c.serveP.Process.Pid)
	if !strings.Contains(string(out), "process "+pid) || !strings.Contains(string(out), "data directory") {
		t.Errorf("the second serve's error does not name the first (pid %s) and the data directory:\n%s", pid, out)
	}
	if err := c.client().Health(context.Background()); err != nil {
		t.Errorf("the first serve after the second's attempt: %v", err)
	}
}
