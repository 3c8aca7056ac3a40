package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/agent/agenttest"
	"github.com/webordinary/webordinary/internal/broker"
	jobreport "github.com/webordinary/webordinary/internal/pipeline/report"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/shots"
)

// TestStatelessWorkerResumesSession: job 1 of a thread runs on worker process A with its own
// directories; A is SIGKILLed; job 2 of the thread runs on worker process B with other, empty
// directories and resumes the same Claude session (fakeclaude: --resume of job 1's session,
// whose file B got from the engine), and serve serves the thread's preview from the engine
// (worker.previews = "engine": no directory shared by the workers and serve).
func TestStatelessWorkerResumesSession(t *testing.T) {
	t.Parallel()
	dir := reachableTempDir(t)
	origin := bareSite(t, dir)
	c, previewAddr := startServeOnly(t, dir)
	claude := agenttest.BuildFakeClaude(t)
	c.cli(t, "project", "add", "--server", c.api, "--id", "site", "--repo", origin, "--agent", "claude", "--agent-command", claude)

	// A's lease is short, to run out soon after A is killed; B's is not, so that a loaded
	// machine does not make B miss a renewal and run job 2 twice (its second run finds the
	// commit and only sends the result again).
	a := c.statelessWorker(t, "a", previewAddr, "off", time.Second)
	ctx := t.Context()
	job1 := c.sendThread(ctx, "replace Hello with Job one in index.html")
	session := matchOne(t, `started session ([0-9a-f-]{36}) \(turn 1\)`, job1.Result.Summary)
	if _, err := os.Stat(sessionFile(dir, "a", session)); err != nil {
		t.Fatalf("job 1's session file on A: %v", err)
	}
	if err := a.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	browser := shots.FindBrowser() // B takes pictures when it can; serve shows them from the engine
	if browser == "" {
		browser = "off"
	}
	c.statelessWorker(t, "b", previewAddr, browser, 10*time.Second)
	job2 := c.sendThread(ctx, "replace Job one with Job two in index.html")
	if got := matchOne(t, `resumed session ([0-9a-f-]{36}) \(turn 2\)`, job2.Result.Summary); got != session {
		t.Fatalf("job 2 resumed session %s, expected job 1's %s", got, session)
	}
	checkSessionOnB(t, dir, session)
	if job2.Worker == job1.Worker {
		t.Fatalf("both jobs ran on worker %s", job1.Worker)
	}
	if body := previewFile(t, "t1.edit.site.localhost:"+portOf(previewAddr), "/"); !strings.Contains(body, "Job two") {
		t.Fatalf("serve's preview of the thread: %q", body)
	}
	if cached, _ := os.ReadDir(filepath.Join(dir, "data", "preview-cache")); len(cached) == 0 {
		t.Fatal("serve served the preview without reading it from the engine into its cache")
	}
	if browser != "off" {
		checkPicturesOnServe(t, c, job2.Job.ID)
	} else {
		t.Log("no Chromium here: the pictures' way through the engine is not tested end to end")
	}
	for i, j := range []broker.JobRecord{job1, job2} {
		t.Logf("job %d on %s: stages (ms) %v", i+1, j.Worker, jobreport.Of(*j.Result).StagesMs)
	}
	logStateFigures(t, dir)
}

// startServeOnly starts serve without workers, serving previews from the engine, with a
// ready file that names the engine and the preview address.
func startServeOnly(t *testing.T, dir string) (*cluster, string) {
	t.Helper()
	ready := filepath.Join(dir, "ready.json")
	c := &cluster{t: t, dir: dir}
	c.serveP = c.start("serve", "--data", filepath.Join(dir, "data"), "--http", "127.0.0.1:0", "--preview", "127.0.0.1:0",
		"--nats-listen", "127.0.0.1:0", "--smtp", "", "--ready-file", ready, "--workers", "0", "--log-level", "warn",
		"--set", "serve.reconcile=300ms", "--set", "worker.previews=engine")
	t.Cleanup(c.stopAll)
	c.api, c.nats = waitReady(t, ready)
	return c, readyField(t, ready, "preview")
}

// checkPicturesOnServe: serve's job page shows the pictures worker B took into its own
// directory (they came through the engine), and serves one.
func checkPicturesOnServe(t *testing.T, c *cluster, jobID string) {
	t.Helper()
	page := dashboardGet(t, c, "/jobs/"+jobID)
	m := regexp.MustCompile(`/jobs/` + jobID + `/pictures/([a-z0-9-]+\.png)`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("serve's job page shows no pictures of %s:\n%s", jobID, page)
	}
	if pic := dashboardGet(t, c, m[0]); !strings.HasPrefix(pic, "\x89PNG") {
		t.Fatalf("serve's %s is not a PNG (%d bytes)", m[0], len(pic))
	}
	if _, err := os.Stat(filepath.Join(c.dir, "b", "shots", jobID, "report.json")); err != nil {
		t.Fatalf("B's own pictures: %v", err)
	}
}

// dashboardGet fetches a dashboard path from serve with the API token.
func dashboardGet(t *testing.T, c *cluster, path string) string {
	t.Helper()
	token, err := readAPIToken(c.data())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, c.api+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", path, res.Status, body)
	}
	return string(body)
}

// statelessWorker starts a worker process whose data, workspaces, state and shots are
// directories of its own under dir/<name>, deploying previews into the engine; chromium is
// its worker.chromium, ttl its worker.lease_ttl.
func (c *cluster) statelessWorker(t *testing.T, name, previewAddr, chromium string, ttl time.Duration) *os.Process {
	t.Helper()
	own := filepath.Join(c.dir, name)
	creds := c.natsCreds()
	cmd := exec.Command(os.Args[0], "worker", "--nats", c.nats, "--data", filepath.Join(own, "data"), "--workers", "1",
		"--set", "worker.lease_ttl="+ttl.String(), "--log-level", "info", "--set", "worker.workspaces="+filepath.Join(own, "workspaces"),
		"--set", "worker.state="+filepath.Join(own, "state"), "--set", "worker.previews=engine", "--set", "worker.shots="+filepath.Join(own, "shots"),
		"--set", "worker.chromium="+chromium, "--set", "worker.preview_port="+portOf(previewAddr))
	// Its own data directory; the engine's credentials come from the environment, as on
	// another machine.
	cmd.Env = append(os.Environ(), "WO_TEST_AS_MAIN=1", "WO_NATS_USER="+creds.User, "WO_NATS_PASSWORD="+creds.Password)
	return c.startCmd(cmd).Process
}

// sendThread submits instruction on thread t1 of site/alice and waits until it is done.
func (c *cluster) sendThread(ctx context.Context, instruction string) broker.JobRecord {
	c.t.Helper()
	rec, err := c.client().Submit(ctx, router.Request{Project: "site", User: "alice", Thread: "t1", Instruction: instruction})
	if err != nil {
		c.t.Fatalf("submit: %v", err)
	}
	rec = c.job(ctx, rec.Job.ID, 60*time.Second)
	if rec.State != broker.StateDone || rec.Result == nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "procs.log"))
		c.t.Fatalf("job %q ended %s: %+v\n%s", instruction, rec.State, rec.Result, log)
	}
	return rec
}

func sessionFile(dir, worker, session string) string {
	return filepath.Join(dir, worker, "state", "site", "alice", "agent", "fakeclaude", "sessions", session+".json")
}

// checkSessionOnB checks that B's copy of the session holds both runs: job 1's from A and its own.
func checkSessionOnB(t *testing.T, dir, session string) {
	t.Helper()
	raw, err := os.ReadFile(sessionFile(dir, "b", session))
	if err != nil {
		t.Fatalf("the session file on B: %v", err)
	}
	var s struct {
		Runs []struct{ Prompt string } `json:"runs"`
	}
	if err := json.Unmarshal(raw, &s); err != nil || len(s.Runs) != 2 || !strings.Contains(s.Runs[0].Prompt, "Job one") {
		t.Fatalf("the session on B: expected job 1's run then job 2's, got %s (%v)", raw, err)
	}
}

func matchOne(t *testing.T, pattern, s string) string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("expected %s in %q", pattern, s)
	}
	return m[1]
}

func portOf(addr string) string {
	_, p, _ := strings.Cut(addr, ":")
	return p
}

// logStateFigures logs the workers' "agent state" lines (sizes).
func logStateFigures(t *testing.T, dir string) {
	log, _ := os.ReadFile(filepath.Join(dir, "procs.log"))
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "agent state") {
			t.Log(line)
		}
	}
}
