package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	neturl "net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/awstest"
	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/awsq/awsqtest"
)

// chaosAgent takes a per-tenant flock (a second concurrent run for the tenant is an overlap),
// logs start and end with its job, index and lease token, and takes a little while.
const chaosAgent = `exec 9>>"../../../tenant-$WO_PROJECT-$WO_USER.lock"
flock -n 9 || { echo "OVERLAP $WO_PROJECT/$WO_USER $WO_JOB" >> ../../../chaos.log; exit 1; }
echo "start $WO_PROJECT/$WO_USER $WO_INSTRUCTION $WO_LEASE_TOKEN $WO_JOB" >> ../../../chaos.log
sleep 0.1
echo "end $WO_PROJECT/$WO_USER $WO_INSTRUCTION $WO_LEASE_TOKEN $WO_JOB" >> ../../../chaos.log`

// TestChaos: several worker processes are killed with SIGKILL at random while six tenants
// receive jobs. Afterwards every job is done exactly once (one result each), each tenant's
// jobs started in order, and no two runs for a tenant ever overlapped.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test starts processes for ~20s")
	}
	t.Parallel()
	// The protocol is under test here, not the sandbox: the agent appends to one shared log.
	c := startCluster(t, chaosAgent, 1, "--set", "serve.interrupt_policy=queue", "--sandbox", "off")
	ids := chaos(t, c, 6, 25)
	// A job's record is final before its result is published, and a worker killed between
	// the two leaves the result to the job's next owner: wait for every job's result.
	results := countResults(t, c)
	for deadline := time.Now().Add(90 * time.Second); !allCounted(ids, results) && time.Now().Before(deadline); {
		time.Sleep(time.Second)
		results = countResults(t, c)
	}
	for _, list := range ids {
		for _, id := range list {
			if results[id] != 1 {
				t.Errorf("job %s has %d results; want exactly 1", id, results[id])
			}
		}
	}
}

// allCounted reports whether every job in ids has a result in results.
func allCounted(ids map[string][]string, results map[string]int) bool {
	for _, list := range ids {
		for _, id := range list {
			if results[id] == 0 {
				return false
			}
		}
	}
	return true
}

// TestChaosAWS is TestChaos on the awsq backend (SQS and DynamoDB emulators), scaled down to
// stay bounded (3 tenants × 12 jobs): serve and the worker processes all open the same aws://
// URL. Results are consumed by serve's router from SQS, so "one result each" is left to the
// results queue's de-duplication by job id (brokertest); every job must end done, in order,
// without overlap.
func TestChaosAWS(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test starts processes for ~30s")
	}
	t.Parallel()
	url := awsEngineURL(t)
	c := startCluster(t, chaosAgent, 1, "--set", "serve.interrupt_policy=queue", "--sandbox", "off", "--engine", url, "--nats-listen", "")
	chaos(t, c, 3, 12)
}

// awsEngineURL is an aws:// URL with a fresh prefix on the shared emulators (fauxqs and
// dynalite), creating what is missing; the test is skipped where they are not installed
// (failed under CI=true).
func awsEngineURL(t *testing.T) string {
	t.Helper()
	sqs, ddb := awstest.FauxQS(t), awstest.Dynalite(t)
	return "aws://?region=us-east-1&create=true&pollwait=2s&prefix=" + awsqtest.Prefix() +
		"&sqs=" + neturl.QueryEscape(sqs) + "&s3=" + neturl.QueryEscape(sqs) + "&dynamodb=" + neturl.QueryEscape(ddb)
}

// chaos runs three worker processes of two workers each beside c's serve, kills one at
// random every 0.2–0.6 s (starting a new one) while tenants×jobs jobs arrive, and checks that
// every job ended done, each tenant's jobs started in order and no two runs overlapped. It
// returns the job ids per tenant.
func chaos(t *testing.T, c *cluster, tenants, jobs int) map[string][]string {
	t.Helper()
	for range 3 {
		c.worker(2)
	}
	ctx := context.Background()
	stopChaos := c.killAtRandom(t)
	ids := map[string][]string{}
	for j := range jobs {
		for u := range tenants {
			rec := c.submit(ctx, "chaos", fmt.Sprintf("u%d", u), strconv.Itoa(j))
			ids[rec.Job.Tenant.String()] = append(ids[rec.Job.Tenant.String()], rec.Job.ID)
		}
		time.Sleep(200 * time.Millisecond)
	}
	kills := stopChaos()
	for _, list := range ids {
		for _, id := range list {
			if rec := c.job(ctx, id, 90*time.Second); rec.State != broker.StateDone {
				t.Fatalf("job %s ended %s (%s)", id, rec.State, rec.LastError)
			}
		}
	}
	runs := checkChaosLog(t, filepath.Join(c.dir, "chaos.log"), tenants, jobs)
	t.Logf("chaos: %d worker processes killed with SIGKILL; %d jobs done; %d agent runs (%d re-runs after kills); 0 overlaps",
		kills, tenants*jobs, runs, runs-tenants*jobs)
	return ids
}

// killAtRandom kills a random worker process every 0.2–0.6 s and starts a new one, until the
// returned stop is called; stop reports how many it killed.
func (c *cluster) killAtRandom(t *testing.T) (stop func() int) {
	done, count := make(chan struct{}), make(chan int, 1)
	go func() {
		kills := 0
		defer func() { count <- kills }()
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Duration(200+rand.IntN(400)) * time.Millisecond):
			}
			c.mu.Lock()
			var workers []int
			for i, p := range c.procs {
				if p != c.serveP && !c.exited[p] {
					workers = append(workers, i)
				}
			}
			if len(workers) == 0 { // the test is ending: stopAll killed them
				c.mu.Unlock()
				continue
			}
			victim := c.procs[workers[rand.IntN(len(workers))]]
			c.mu.Unlock()
			_ = victim.Process.Kill()
			kills++
			c.worker(2)
		}
	}()
	return func() int { close(done); return <-count }
}

// checkChaosLog verifies the agents' log: no overlap, and per tenant, job indexes start in
// non-decreasing order and every index ran to its end. It returns the number of runs.
func checkChaosLog(t *testing.T, path string, tenants, jobs int) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	last, ended := map[string]int{}, map[string]map[int]bool{}
	runs := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if fields[0] == "OVERLAP" {
			t.Errorf("two runs at once: %s", sc.Text())
			continue
		}
		tn, idx := fields[1], atoi(t, fields[2])
		switch fields[0] {
		case "start":
			runs++
			if prev, ok := last[tn]; ok && idx < prev {
				t.Errorf("%s started job %d after job %d: out of order", tn, idx, prev)
			}
			last[tn] = idx
		case "end":
			if ended[tn] == nil {
				ended[tn] = map[int]bool{}
			}
			ended[tn][idx] = true
		}
	}
	if len(ended) != tenants {
		t.Fatalf("%d tenants ran; want %d", len(ended), tenants)
	}
	for tn, set := range ended {
		if len(set) != jobs {
			t.Errorf("%s completed %d distinct jobs; want %d", tn, len(set), jobs)
		}
	}
	return runs
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("bad log field %q", s)
	}
	return n
}

// countResults reads the results stream of the serve's engine: results per job id.
func countResults(t *testing.T, cl *cluster) map[string]int {
	t.Helper()
	creds := cl.natsCreds()
	return countResultsAt(t, cl.nats, nats.UserInfo(creds.User, creds.Password))
}

// countResultsAt reads the results stream of the engine at url: results per job id.
func countResultsAt(t *testing.T, url string, opts ...nats.Option) map[string]int {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	// A consumer made just after a cluster lost a node can stay silent for a while: read
	// again with a fresh one until the whole stream has been read (at most 5 tries).
	var out map[string]int
	var read, total int
	for try := 0; try < 5; try++ {
		out, read, total, err = readResults(js)
		if err == nil && read >= total {
			return out
		}
		t.Logf("results read %d of %d (%v); reading again", read, total, err)
		time.Sleep(2 * time.Second)
	}
	t.Fatalf("could not read the results stream: %d of %d, %v", read, total, err)
	return nil
}

// readResults counts the results streams' messages (WO_RESULTS and its shards) by job id,
// with one ordered consumer each.
func readResults(js jetstream.JetStream) (map[string]int, int, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out := map[string]int{}
	var read, total int
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		if name != "WO_RESULTS" && !strings.HasPrefix(name, "WO_RESULTS_") {
			continue
		}
		n, t, err := readResultStream(ctx, js, name, out)
		read, total = read+n, total+t
		if err != nil {
			return out, read, total, err
		}
	}
	if err := names.Err(); err != nil {
		return out, read, total, err
	}
	if total == 0 {
		return out, 0, 0, errors.New("no results stream")
	}
	return out, read, total, nil
}

// readResultStream adds one results stream's messages to out: how many it read of how many.
func readResultStream(ctx context.Context, js jetstream.JetStream, stream string, out map[string]int) (int, int, error) {
	c, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return 0, 0, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return 0, 0, err
	}
	total := int(info.NumPending)
	n := 0
	for n < total {
		batch, err := c.Fetch(total-n, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return n, total, err
		}
		got := 0
		for m := range batch.Messages() {
			id := strings.TrimPrefix(string(m.Headers().Get("Nats-Msg-Id")), "result-")
			out[id]++
			got++
		}
		if got == 0 {
			break
		}
		n += got
	}
	return n, total, nil
}

// orphanAgent starts a tool shell in its own session (as agents do) and a plain child,
// records their pids and its own, then waits.
const orphanAgent = `setsid sleep 300 & echo $! >> ../../../pids
sleep 300 & echo $! >> ../../../pids
echo $$ >> ../../../pids
wait`

// TestKilledWorkerLeavesNoProcesses: kill -9 a worker process mid-job; nothing its agent
// started (including a setsid'd grandchild) may keep running, and the job is taken over.
func TestKilledWorkerLeavesNoProcesses(t *testing.T) {
	t.Parallel()
	// Unsandboxed: the pids the agent records must be the host's (a sandboxed job's die with its
	// PID namespace; TestHostileJob covers that side).
	c := startCluster(t, orphanAgent, 0, "--sandbox", "off")
	w := c.worker(1)
	ctx := context.Background()
	rec := c.submit(ctx, "orphan", "alice", "run forever")
	pidFile := filepath.Join(c.dir, "pids")
	var pids []int
	deadline := time.Now().Add(20 * time.Second)
	for len(pids) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("agent did not start; pids %v", pids)
		}
		time.Sleep(20 * time.Millisecond)
		pids = readPids(pidFile)
	}
	wantSandbox(t, c, "UNSANDBOXED")
	_ = w.Process.Kill()
	c.start("worker", "--nats", c.nats, "--set", "worker.processor=noop", "--set", "worker.lease_ttl=1s")
	deadline = time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d started by the killed worker is still running", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if got := c.job(ctx, rec.Job.ID, 30*time.Second); got.State != broker.StateDone {
		t.Fatalf("job ended %s after takeover; want done by the second worker", got.State)
	}
}

func readPids(path string) []int {
	data, _ := os.ReadFile(path)
	var out []int
	for _, f := range strings.Fields(string(data)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}
