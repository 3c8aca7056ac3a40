package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/api"
	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/router"
)

// cluster is a real `serve` process plus `worker` processes of this test binary.
type cluster struct {
	t       *testing.T
	dir     string
	api     string
	nats    string
	agent   string
	mu      sync.Mutex
	procs   []*exec.Cmd
	exited  map[*exec.Cmd]bool
	serveP  *exec.Cmd
	sandbox string // --sandbox of serve and its workers
	engine  string // serve's --engine when given: workers join it there instead of --nats
}

// startCluster starts serve (its own workers: serveWorkers) and waits until it is ready.
func startCluster(t *testing.T, agent string, serveWorkers int, extra ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: reachableTempDir(t), agent: agent, sandbox: "auto"}
	if i := slices.Index(extra, "--sandbox"); i >= 0 && i+1 < len(extra) {
		c.sandbox = extra[i+1]
	}
	if i := slices.Index(extra, "--engine"); i >= 0 && i+1 < len(extra) {
		c.engine = extra[i+1]
	}
	ready := filepath.Join(c.dir, "ready.json")
	args := append([]string{"serve", "--data", filepath.Join(c.dir, "data"), "--http", "127.0.0.1:0",
		"--nats-listen", "127.0.0.1:0", "--ready-file", ready, "--workers", fmt.Sprint(serveWorkers),
		"--set", "worker.processor=command", "--set", "worker.agent_command=" + agent, "--set", "worker.lease_ttl=1s", "--set", "serve.reconcile=300ms", "--set", "engine.no_sync=true", "--preview", "",
		"--set", "worker.shutdown_grace=1s", "--log-level", "warn", "--smtp", "", "--set", "worker.workspaces=" + filepath.Join(c.dir, "workspaces")}, extra...)
	c.serveP = c.start(args...)
	c.api, c.nats = waitReady(t, ready)
	t.Cleanup(c.stopAll)
	return c
}

func (c *cluster) start(args ...string) *exec.Cmd {
	c.t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = c.env()
	return c.startCmd(cmd)
}

// startCmd starts cmd (a webordinary process) in the cluster's directory, logging to procs.log.
func (c *cluster) startCmd(cmd *exec.Cmd) *exec.Cmd {
	c.t.Helper()
	cmd.Dir = c.dir
	log, err := os.OpenFile(filepath.Join(c.dir, "procs.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		log.Close()
		c.mu.Lock()
		if c.exited == nil {
			c.exited = map[*exec.Cmd]bool{}
		}
		c.exited[cmd] = true
		c.mu.Unlock()
	}()
	c.mu.Lock()
	c.procs = append(c.procs, cmd)
	c.mu.Unlock()
	return cmd
}

// worker starts a worker process with n workers.
func (c *cluster) worker(n int) *exec.Cmd {
	join := []string{"--nats", c.nats}
	if c.engine != "" {
		join = []string{"--engine", c.engine}
	}
	return c.start(append([]string{"worker"}, append(join, "--workers", fmt.Sprint(n), "--set", "worker.processor=command", "--set", "worker.agent_command="+c.agent,
		"--set", "worker.workspaces="+filepath.Join(c.dir, "workspaces"), "--set", "worker.lease_ttl=1s", "--log-level", "warn", "--sandbox", c.sandbox)...)...)
}

func (c *cluster) stopAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		_ = p.Process.Kill()
	}
}

func waitReady(t *testing.T, file string) (api, nats string) {
	t.Helper()
	return waitReadyWithin(t, file, 20*time.Second)
}

func waitReadyWithin(t *testing.T, file string, within time.Duration) (api, nats string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if data, err := os.ReadFile(file); err == nil {
			var r map[string]string
			if json.Unmarshal(data, &r) == nil {
				return r["api"], r["nats"]
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(filepath.Dir(file), "procs.log"))
	t.Fatalf("serve not ready within %s; its log:\n%s", within, log)
	return "", ""
}

func (c *cluster) submit(ctx context.Context, project, user, instruction string) broker.JobRecord {
	c.t.Helper()
	rec, err := c.client().Submit(ctx, router.Request{Project: project, User: user, Thread: "chaos", Instruction: instruction})
	if err != nil {
		c.t.Fatalf("submit: %v", err)
	}
	return rec
}

func (c *cluster) job(ctx context.Context, id string, within time.Duration) broker.JobRecord {
	c.t.Helper()
	rec, err := c.client().WaitJob(ctx, id, within)
	if err != nil {
		c.t.Fatalf("wait for %s: %v", id, err)
	}
	return rec
}

func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// data is the serve's data directory (tests pass it as --data); its processes and CLI
// commands find the engine's credentials and the API token there through WO_DATA, as on
// serve's machine.
func (c *cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *cluster) env() []string {
	return append(os.Environ(), "WO_TEST_AS_MAIN=1", "WO_DATA="+c.data())
}

// client is an API client with the data directory's token.
func (c *cluster) client() *api.Client {
	c.t.Helper()
	token, err := readAPIToken(c.data())
	if err != nil || token == "" {
		c.t.Fatalf("API token in %s: %q, %v", c.data(), token, err)
	}
	return api.NewClient(c.api, token)
}

// natsCreds are the engine's generated credentials.
func (c *cluster) natsCreds() natsCreds {
	c.t.Helper()
	creds, ok, err := readNATSCreds(c.data())
	if !ok || err != nil {
		c.t.Fatalf("engine credentials in %s: %v", c.data(), err)
	}
	return creds
}

// reachableTempDir is a t.TempDir that a sandboxed job's unprivileged user can enter (t.TempDir
// makes 0700 directories; the data dir's workspaces live below it).
func reachableTempDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}
