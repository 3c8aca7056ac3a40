package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
)

// TestServeWithTheUnitsCapability: deploy/webordinary.service lets serve bind port 25 (the
// README offers running it as the MX) by giving it CAP_NET_BIND_SERVICE as an ambient
// capability, and nothing more. Serve started the way that unit starts it — a user other than
// root holding that capability — still runs its jobs in the sandbox: bubblewrap refuses to
// run with any capability it was not made setuid for ("Unexpected capabilities but not
// setuid"), so serve must pass none to what it starts.
func TestServeWithTheUnitsCapability(t *testing.T) {
	t.Parallel()
	unit := strings.Split(readFile(t, "../../deploy/webordinary.service"), "\n")
	for _, want := range []string{"AmbientCapabilities=CAP_NET_BIND_SERVICE", "CapabilityBoundingSet=CAP_NET_BIND_SERVICE"} {
		if !slices.Contains(unit, want) {
			t.Errorf("deploy/webordinary.service lacks %q: serve could not bind port 25 as the MX", want)
		}
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and setpriv (util-linux) to start serve as another user with the unit's capability")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("needs bubblewrap (apt-get install bubblewrap)")
	}
	dir := reachableTempDir(t)
	bin := copyExecutable(t, os.Args[0], filepath.Join(dir, "webordinary"))
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, dir: dir}
	ready := filepath.Join(dir, "ready.json")
	serve := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
		"--inh-caps=+net_bind_service", "--ambient-caps=+net_bind_service", "--bounding-set=-all,+net_bind_service",
		"--no-new-privs", "--",
		bin, "serve", "--data", c.data(), "--sandbox", "required", "--http", "127.0.0.1:0", "--preview", "",
		"--nats-listen", "", "--smtp", "", "--ready-file", ready, "--workers", "1", "--no-sync", "--log-level", "warn",
		"--processor", "command", "--agent-command", `echo "done: $WO_INSTRUCTION"`)
	serve.Env = []string{"WO_TEST_AS_MAIN=1", "HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	c.serveP = c.startCmd(serve)
	t.Cleanup(c.stopAll)
	c.api, _ = waitReady(t, ready)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	rec := c.job(ctx, c.submit(ctx, "site", "owner", "hello").Job.ID, 90*time.Second)
	if rec.State != broker.StateDone {
		t.Fatalf("job under the unit's capability: %s %q\n%s", rec.State, rec.LastError, readFile(t, filepath.Join(dir, "procs.log")))
	}
}

// copyExecutable copies the program at src to dst (mode 0755), for a user who cannot reach src.
func copyExecutable(t *testing.T, src, dst string) string {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}
