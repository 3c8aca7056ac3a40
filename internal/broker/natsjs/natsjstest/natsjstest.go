// Package natsjstest starts a real embedded NATS JetStream server per test, so tests of the
// worker, router and CLI run against the engine itself, never a mock.
package natsjstest

import (
	"context"
	"crypto/rand"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/natsjs"
)

// Env is one test's engine.
type Env struct {
	Server  *server.Server
	Conn    *nats.Conn
	Backend *broker.Backend
	// URL is set when the server listens on loopback (Options.Listen); it carries User and
	// Password, which every client needs.
	URL string
	// User and Password are the server's generated credentials.
	User, Password string
}

// Options tune Start.
type Options struct {
	// Listen opens a loopback port so other processes can connect.
	Listen bool
	// NoSync relaxes fsync (faster tests that do not test durability).
	NoSync bool
}

// Start starts a server on t.TempDir() and a backend on an in-process connection; both stop
// at the end of the test.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	env := &Env{User: "test", Password: rand.Text()}
	cfg := natsjs.ServerConfig{Dir: t.TempDir(), NoSync: opts.NoSync, User: env.User, Password: env.Password}
	if opts.Listen {
		cfg.Listen = "127.0.0.1:-1"
	}
	s, err := natsjs.StartServer(cfg)
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	env.Server = s
	if opts.Listen {
		env.URL = strings.Replace(s.ClientURL(), "://", "://"+env.User+":"+env.Password+"@", 1)
	}
	env.Conn, env.Backend = Connect(t, env)
	return env
}

// Connect opens another in-process connection and backend on env's server.
func Connect(t testing.TB, env *Env) (*nats.Conn, *broker.Backend) {
	t.Helper()
	nc, err := natsjs.ConnectInProcess(env.Server, env.User, env.Password)
	if err != nil {
		t.Fatalf("connect nats: %v", err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := natsjs.New(ctx, nc, natsjs.Config{ClaimAckWait: 2 * time.Second})
	if err != nil {
		t.Fatalf("natsjs backend: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() }) // before nc's: it stops the backend's pulls and watches
	return nc, b
}

// FreePorts returns n loopback ports free a moment ago, for servers that must know each
// other's addresses before any starts (cluster routes).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var out []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns, out = append(lns, ln), append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		_ = ln.Close()
	}
	return out
}

// FreeAddrs is FreePorts as 127.0.0.1:port addresses.
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	var out []string
	for _, p := range FreePorts(t, n) {
		out = append(out, net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	}
	return out
}
