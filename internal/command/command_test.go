package command_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/capability"
	"github.com/webordinary/webordinary/internal/command"
	"github.com/webordinary/webordinary/internal/egress"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/reaper"
	"github.com/webordinary/webordinary/internal/sandbox"
	"github.com/webordinary/webordinary/internal/tenant"
	"github.com/webordinary/webordinary/internal/worker"
)

func TestMain(m *testing.M) {
	reaper.Main()
	os.Exit(m.Run())
}

// TestCommandNetworkIsItsOwn: the command processor's command, steered by the instruction,
// reaches for a service on the host's loopback and prints its environment.
func TestCommandNetworkIsItsOwn(t *testing.T) {
	capability.Need(t, capability.Bubblewrap)
	capability.Need(t, capability.Curl)
	const realKey = "sk-ant-platform-real-key"
	t.Setenv("ANTHROPIC_API_KEY", realKey)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.0 200 OK\r\n\r\nplatform secret\n")
			c.Close()
		}
	}()
	addr := ln.Addr().String()
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
	proxy, err := egress.New(egress.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	host, port, _ := net.SplitHostPort(addr)
	script := fmt.Sprintf(`bash -c 'exec 3<>/dev/tcp/%s/%s && cat <&3'; NO_PROXY= no_proxy= curl -sS -x "$HTTP_PROXY" http://%s/; env; true`, host, port, addr)
	p, err := command.New(command.Config{Command: script, Root: filepath.Join(root, "ws"), Sandbox: sb, Egress: proxy})
	if err != nil {
		t.Fatal(err)
	}
	tn, _ := tenant.New("site", "alice")
	out, err := p.Process(context.Background(), worker.Task{
		Job:     jobspec.Spec{Instruction: "attack"}.On(broker.Job{ID: broker.NewJobID(), Tenant: tn, Thread: "t1"}),
		Attempt: 1, CheckLease: func(context.Context) error { return nil }})
	if err != nil {
		t.Fatalf("command: %v (%+v)", err, out)
	}
	if strings.Contains(out.OutputTail, "secret") || strings.Contains(out.OutputTail, realKey) {
		t.Errorf("the command reached the host's service or saw the real key:\n%s", out.OutputTail)
	}
	if d := out.Report.EgressDenied; len(d) != 1 || d[0].Target != addr {
		t.Errorf("denials %+v, want %s", d, addr)
	}
}
