package pipeline_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/webordinary/webordinary/internal/capability"
	"github.com/webordinary/webordinary/internal/egress"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/sandbox"
	"github.com/webordinary/webordinary/internal/worker"
)

// TestJobNetworkIsItsOwn runs a job whose agent attacks: it reaches for a service on the
// host's loopback directly and through the proxy, dumps its environment into the commit, and
// calls the model API. The platform runs as it does by default: sandboxed, behind the proxy.
func TestJobNetworkIsItsOwn(t *testing.T) {
	capability.Need(t, capability.Bubblewrap)
	capability.Need(t, capability.Curl)
	const realKey = "sk-ant-platform-real-key"
	t.Setenv("ANTHROPIC_API_KEY", realKey)
	service, hits := loopbackService(t)
	_, port, _ := net.SplitHostPort(service)
	model, keys := keyRecorder(t)
	script := strings.Join([]string{
		fmt.Sprintf(`bash -c 'exec 3<>/dev/tcp/127.0.0.1/%s && cat <&3' > direct.txt 2>&1`, port),
		fmt.Sprintf(`NO_PROXY= no_proxy= curl -sS -x "$HTTP_PROXY" http://%s/ > forward.txt 2>&1`, service),
		fmt.Sprintf(`NO_PROXY= no_proxy= curl -sS -p -x "$HTTPS_PROXY" http://%s/ > tunnel.txt 2>&1`, service),
		`env > env.txt`,
		`curl -sS -f -H "x-api-key: $ANTHROPIC_API_KEY" -d '{}' "$ANTHROPIC_BASE_URL/v1/messages" > model.txt 2>&1`,
		`true`,
	}, "; ")
	var sb *sandbox.Sandbox
	f := setupConfig(t, site, func(p *project.Project) {
		p.Agent = project.AgentSpec{Kind: "command", Command: script}
	}, func(c *pipelineConfig) {
		sb = jobSandbox(t, c)
		proxy, err := egress.New(egress.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { proxy.Close() })
		c.Sandbox, c.Egress, c.AgentBaseURL = sb, proxy, model.URL
	})
	out, err := f.run(task("t1", "attack"))
	if err != nil {
		t.Fatalf("job: %v (%+v)", err, out)
	}
	if n := hits(); n != 0 {
		t.Errorf("the host's loopback service was reached %d times", n)
	}
	for _, name := range []string{"direct.txt", "forward.txt", "tunnel.txt"} {
		if body := git(t, f.origin, "show", "thread-t1:"+name); strings.Contains(body, "secret") {
			t.Errorf("%s: the job read the host's service: %s", name, body)
		}
	}
	if env := git(t, f.origin, "show", "thread-t1:env.txt"); strings.Contains(env, realKey) {
		t.Errorf("the agent's environment has the real key:\n%s", env)
	}
	if body := git(t, f.origin, "show", "thread-t1:model.txt"); body != modelReply {
		t.Errorf("the agent's model call got %q", body)
	}
	if got := keys(); len(got) != 1 || got[0] != realKey {
		t.Errorf("the model server got keys %q, want the real key once", got)
	}
	if r := out.Report; r.ModelTokensIn != 12 || r.ModelTokensOut != 3 {
		t.Errorf("report's model tokens %d in, %d out: want 12 and 3", r.ModelTokensIn, r.ModelTokensOut)
	}
	denied := 0
	for _, d := range out.Report.EgressDenied {
		if d.Target == service {
			denied += d.Count
		}
	}
	if denied != 2 {
		t.Errorf("report's egress denials %+v: want %s twice", out.Report.EgressDenied, service)
	}
}

// jobSandbox is a sandbox for the pipeline's directories, reachable by the job's user.
func jobSandbox(t *testing.T, c *pipelineConfig) *sandbox.Sandbox {
	t.Helper()
	dir := filepath.Dir(c.Workspaces)
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sb, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeRequired, Roots: []string{c.Workspaces, c.State}})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// loopbackService is a service on the host's loopback that answers with a secret.
func loopbackService(t *testing.T) (string, func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	n := 0
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
			io.WriteString(c, "HTTP/1.0 200 OK\r\n\r\nplatform secret\n")
			c.Close()
		}
	}()
	return ln.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// modelReply is the model API's answer, with its usage.
const modelReply = `{"type":"message","usage":{"input_tokens":12,"output_tokens":3}}`

// keyRecorder is a model API that records the API keys it gets.
func keyRecorder(t *testing.T) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("x-api-key"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, modelReply)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), keys...) }
}

// TestAnyAgentStopsAtItsBudget: whatever the agent (here a command, which has no budget flag
// of its own), the proxy refuses its model calls once they cost the project's
// --max-budget-usd, and the job fails for that reason, for good.
func TestAnyAgentStopsAtItsBudget(t *testing.T) {
	capability.Need(t, capability.Bubblewrap)
	capability.Need(t, capability.Curl)
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-platform-real-key")
	var calls atomic.Int64
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json") // $0.0675 a call at opus's list price
		io.WriteString(w, `{"type":"message","model":"claude-opus-4-1","usage":{"input_tokens":1000,"output_tokens":700}}`)
	}))
	t.Cleanup(model.Close)
	script := `for i in $(seq 100); do curl -sS -f -H "x-api-key: $ANTHROPIC_API_KEY" -d '{}' "$ANTHROPIC_BASE_URL/v1/messages" || exit 1; done`
	f := setupConfig(t, site, func(p *project.Project) {
		p.Agent = project.AgentSpec{Kind: "command", Command: script, MaxBudgetUSD: 0.2}
	}, func(c *pipelineConfig) {
		proxy, err := egress.New(egress.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { proxy.Close() })
		c.Sandbox, c.Egress, c.AgentBaseURL = jobSandbox(t, c), proxy, model.URL
	})
	out, err := f.run(task("t1", "spend"))
	if !errors.Is(err, worker.ErrPermanent) || !strings.Contains(err.Error(), "budget") || !strings.Contains(err.Error(), "--max-budget-usd") {
		t.Fatalf("job: %v (%+v), want a permanent failure naming the budget", err, out.Summary)
	}
	if n := calls.Load(); n != 3 { // $0.0675, $0.135, $0.2025: the fourth is refused
		t.Errorf("the model served %d calls, want 3 within a $0.20 budget", n)
	}
}
