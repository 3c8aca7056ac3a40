package egress_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/webordinary/webordinary/internal/capability"
	"github.com/webordinary/webordinary/internal/egress"
	"github.com/webordinary/webordinary/internal/reaper"
	"github.com/webordinary/webordinary/internal/sandbox"
)

func TestMain(m *testing.M) {
	reaper.Main()
	os.Exit(m.Run())
}

// env is a sandbox, an egress proxy and a job directory, as the platform sets them up.
type env struct {
	sb    *sandbox.Sandbox
	proxy *egress.Proxy
	dir   string
}

func setup(t testing.TB) env {
	t.Helper()
	capability.Need(t, capability.Bubblewrap)
	capability.Need(t, capability.Curl)
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sb, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeRequired, Roots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "ws")
	if err := sb.MkdirOwned(dir); err != nil {
		t.Fatal(err)
	}
	p, err := egress.New(egress.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return env{sb: sb, proxy: p, dir: dir}
}

// open starts a session with policy, closed at the end of the test.
func (e env) open(t *testing.T, policy egress.Policy) *egress.Session {
	t.Helper()
	s, err := e.proxy.Open(policy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// run runs script with bash in the session's jail, as the platform runs a job, with the
// proxy's variables and extra, and returns its output and exit code.
func (e env) run(t *testing.T, s *egress.Session, script string, extra ...string) (string, int) {
	t.Helper()
	// The attacker (and the allowed-host tests) go through the proxy even to loopback names.
	cmd := exec.Command("/bin/bash", "-c", "unset NO_PROXY no_proxy; "+script)
	cmd.Dir = e.dir
	cmd.Env = append(append([]string{"PATH=/usr/bin:/bin", "HOME=" + e.dir}, s.Env()...), extra...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	j := e.sb.Jail(sandbox.Spec{Writable: []string{e.dir}, Egress: &sandbox.Egress{Socket: s.Socket, Port: e.proxy.Port()}})
	p, err := j.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	code, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

// hostService is a TCP service on the host's loopback, like the platform's SMTP intake or
// API: it answers every connection with a secret.
func hostService(t *testing.T) (addr string, hits func() int) {
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
			io.WriteString(c, "220 platform secret\r\n")
			c.Close()
		}
	}()
	return ln.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return n }
}

func TestJobCannotReachTheHostsLoopback(t *testing.T) {
	t.Parallel()
	e := setup(t)
	addr, hits := hostService(t)
	host, port, _ := net.SplitHostPort(addr)
	s := e.open(t, egress.Policy{Allow: []string{"registry.npmjs.org"}})
	attacks := map[string]string{
		"direct TCP":            fmt.Sprintf("exec 3<>/dev/tcp/%s/%s && cat <&3", host, port),
		"CONNECT via the proxy": fmt.Sprintf("curl -sS -f -p -x $HTTPS_PROXY telnet://%s", addr),
		"plain HTTP via proxy":  fmt.Sprintf("curl -sS -f -x $HTTP_PROXY http://%s/", addr),
		"localhost by name":     fmt.Sprintf("curl -sS -f -p -x $HTTPS_PROXY https://localhost:%s/", port),
	}
	for name, script := range attacks {
		if out, code := e.run(t, s, script); code == 0 || strings.Contains(out, "secret") {
			t.Errorf("%s: reached the host's service (exit %d): %s", name, code, out)
		}
	}
	if n := hits(); n != 0 {
		t.Errorf("the host's service was reached %d times", n)
	}
	denied := map[string]int{}
	for _, d := range s.Denied() {
		denied[d.Target] += d.Count
	}
	if denied[addr] != 2 || denied["localhost:"+port] != 1 {
		t.Errorf("denials %+v: want %s twice and localhost:%s once", s.Denied(), addr, port)
	}
}

func TestJobReachesAnAllowedHost(t *testing.T) {
	t.Parallel()
	e := setup(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "package tarball")
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	target := "localhost:" + port
	// An allowed host on the loopback needs its host:port in Private too (tests, an
	// operator's internal registry).
	s := e.open(t, egress.Policy{Allow: []string{target}, Private: []string{target}})
	for _, script := range []string{
		"curl -sS -f http://" + target + "/pkg",
		"curl -sS -f -p -x $HTTPS_PROXY http://" + target + "/pkg", // through a CONNECT tunnel
	} {
		if out, code := e.run(t, s, script); code != 0 || out != "package tarball" {
			t.Errorf("%s: exit %d: %s", script, code, out)
		}
	}
	if d := s.Denied(); len(d) != 0 {
		t.Errorf("denials %+v, want none", d)
	}
}

// modelServer is a model API that records the keys it was sent.
func modelServer(t *testing.T) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.URL.Path+" "+r.Header.Get("x-api-key"))
		mu.Unlock()
		io.WriteString(w, `{"type":"message","content":[{"type":"text","text":"hi"}]}`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), keys...) }
}

func TestModelKeyStaysOutsideTheJob(t *testing.T) {
	t.Parallel()
	e := setup(t)
	srv, keys := modelServer(t)
	const realKey = "sk-ant-real-key-of-the-platform"
	m, err := egress.AnthropicModel(srv.URL, realKey)
	if err != nil {
		t.Fatal(err)
	}
	s := e.open(t, egress.Policy{Models: []egress.Model{m}})
	base := s.BaseURL("anthropic")
	agentEnv := s.AgentEnv()
	if want := []string{"ANTHROPIC_BASE_URL=" + base, "ANTHROPIC_API_KEY=" + s.Token}; strings.Join(agentEnv, " ") != strings.Join(want, " ") {
		t.Fatalf("agent env %q, want %q", agentEnv, want)
	}
	out, code := e.run(t, s, `env; curl -sS -f -H "x-api-key: $ANTHROPIC_API_KEY" -d '{}' $ANTHROPIC_BASE_URL/v1/messages`, agentEnv...)
	if code != 0 || !strings.Contains(out, `"text":"hi"`) {
		t.Fatalf("the agent's request failed (exit %d): %s", code, out)
	}
	if strings.Contains(out, realKey) {
		t.Errorf("the real key is visible inside the job: %s", out)
	}
	if got := keys(); len(got) != 1 || got[0] != "/v1/messages "+realKey {
		t.Errorf("the model server got %q, want one request with the real key", got)
	}
	// The platform's key calls the model, nothing else of the vendor's API (files, batches).
	for _, p := range []string{"/v1/files", "/v1/messages/batches", "/v1/messages/../files", "/v1/messages/batches/../../files", "//v1/messages"} {
		if out, code := e.run(t, s, `curl -sS -f --path-as-is -H "x-api-key: $ANTHROPIC_API_KEY" $ANTHROPIC_BASE_URL`+p, agentEnv...); code == 0 {
			t.Errorf("%s was served with the platform's key: %s", p, out)
		}
	}
	if got := keys(); len(got) != 1 {
		t.Errorf("the model server got %q: a request beyond the model calls reached it", got)
	}

	// The job is over: its token no longer works, not even through another job's session.
	s.Close()
	next := e.open(t, egress.Policy{Models: []egress.Model{m}})
	out, code = e.run(t, next, fmt.Sprintf(`curl -sS -f -H "x-api-key: %s" -d '{}' %s/v1/messages`, s.Token, base))
	if code == 0 {
		t.Errorf("an ended job's token still works: %s", out)
	}
	if got := keys(); len(got) != 1 {
		t.Errorf("the model server got %q after the job ended", got)
	}
	if out, code := e.run(t, next, "curl -sS -f -d '{}' "+base+"/v1/messages"); code == 0 {
		t.Errorf("no token works: %s", out)
	}
}

// TestInterruptReachesTheJobBehindTheBridge: the bridge stands between bwrap and the job's
// program; an interrupt must still reach the program, and the proxy must still serve it while
// it winds down.
func TestInterruptReachesTheJobBehindTheBridge(t *testing.T) {
	t.Parallel()
	e := setup(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "saved")
	}))
	t.Cleanup(srv.Close)
	target := srv.Listener.Addr().String()
	s := e.open(t, egress.Policy{Allow: []string{target}, Private: []string{target}})
	cmd := exec.Command("/bin/bash", "-c", "unset NO_PROXY no_proxy; trap 'curl -sS http://"+target+"/; echo; echo got-int; exit 3' INT; echo ready; sleep 100 & wait")
	cmd.Dir, cmd.Env = e.dir, append([]string{"PATH=/usr/bin:/bin"}, s.Env()...)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd.Stdout, cmd.Stderr = w, w
	p, err := e.sb.Jail(sandbox.Spec{Writable: []string{e.dir}, Egress: &sandbox.Egress{Socket: s.Socket, Port: e.proxy.Port()}}).Start(cmd)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	ready := make([]byte, len("ready\n"))
	if _, err := io.ReadFull(r, ready); err != nil || string(ready) != "ready\n" {
		t.Fatalf("job did not start: %q %v", ready, err)
	}
	if err := p.Interrupt(); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(r)
	code, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if code != 3 || string(rest) != "saved\ngot-int\n" {
		t.Errorf("exit %d, output %q: want the job's trap to run, reach the network and exit 3", code, rest)
	}
}

// TestAllowedNameOnLoopbackIsRefused: allowing a name does not allow what it resolves to when
// that is the host's loopback (a name an attacker controls can point anywhere).
func TestAllowedNameOnLoopbackIsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	addr, hits := hostService(t)
	_, port, _ := net.SplitHostPort(addr)
	target := "localhost:" + port
	s := e.open(t, egress.Policy{Allow: []string{target}})
	if out, code := e.run(t, s, "curl -sS -f -p -x $HTTPS_PROXY telnet://"+target); code == 0 || strings.Contains(out, "secret") {
		t.Errorf("reached the host's service (exit %d): %s", code, out)
	}
	if hits() != 0 {
		t.Error("the host's service was reached")
	}
	if d := s.Denied(); len(d) != 1 || d[0].Target != target || d[0].Reason != "non-public address" {
		t.Errorf("denials %+v: want %s as a non-public address", d, target)
	}
}
