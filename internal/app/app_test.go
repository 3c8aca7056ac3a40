package app

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/sandbox"
)

// TestValidate: every check names the Config field; defaults are filled; paths are made
// absolute; nothing is written.
func TestValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		cfg   Config
		field string
	}{
		{"role", Config{Role: "router"}, "Role"},
		{"credentials half given", Config{EngineUser: "u"}, "EngineUser"},
		{"worker without engine", Config{Role: RoleWorker}, "Engine"},
		{"engine not a URL", Config{Engine: "localhost:4222"}, "Engine"},
		{"external engine cannot listen", Config{Engine: "nats://h:4222", EngineListen: "127.0.0.1:0"}, "EngineListen"},
		{"embedded cluster member without shared credentials", Config{Engine: "embedded:///tmp/wo/nats?cluster=wo&cluster_listen=127.0.0.1:6222&routes=127.0.0.1:6223"}, "EngineUser"},
		{"http address", Config{HTTPAddr: "8080"}, "HTTPAddr"},
		{"preview address", Config{PreviewAddr: "localhost"}, "PreviewAddr"},
		{"public URL", Config{PublicURL: "edit.example.com"}, "PublicURL"},
		{"policy", Config{InterruptPolicy: "later"}, "InterruptPolicy"},
		{"smtp address", Config{Mail: Mail{SMTPAddr: "25"}}, "Mail.SMTPAddr"},
		{"relay", Config{Mail: Mail{Relay: "smtp.example.com"}}, "Mail.Relay"},
		{"relay tls", Config{Mail: Mail{RelayTLS: "ssl"}}, "Mail.RelayTLS"},
		{"tls key without cert", Config{Mail: Mail{TLSKey: "k.pem"}}, "Mail.TLSCert"},
		{"processor", Config{Worker: Worker{Processor: "shell"}}, "Worker.Processor"},
		{"sandbox", Config{Worker: Worker{Sandbox: "maybe"}}, "Worker.Sandbox"},
		{"job limits", Config{Worker: Worker{JobLimits: "memory=2GiB"}}, "Worker.JobLimits"},
		{"claude login", Config{Worker: Worker{ClaudeLogin: "/nonexistent"}}, "Worker.ClaudeLogin"},
		{"agent base URL", Config{Worker: Worker{AgentBaseURL: "gateway:4000"}}, "Worker.AgentBaseURL"},
		{"held notice", Config{Mail: Mail{HeldNoticeAfter: -time.Second}}, "Mail.HeldNoticeAfter"},
		{"workers", Config{Worker: Worker{Count: -1}}, "Worker.Count"},
		{"lease", Config{Worker: Worker{LeaseTTL: time.Millisecond}}, "Worker.LeaseTTL"},
		{"preview target not s3", Config{Worker: Worker{PreviewTarget: "/srv/previews"}}, "Worker.PreviewTarget"},
		{"preview target bucket", Config{Worker: Worker{PreviewTarget: "s3://Bad_Bucket/p"}}, "Worker.PreviewTarget"},
		{"ses and relay", Config{Mail: Mail{SES: true, Relay: "smtp.example.com:587"}}, "Mail.SES"},
		{"ses configuration set alone", Config{Mail: Mail{SESConfigurationSet: "cs"}}, "Mail.SESConfigurationSet"},
		{"ses queue not a URL", Config{Mail: Mail{SESQueue: "wo-inbound"}}, "Mail.SESQueue"},
		{"ses queue beside smtp", Config{Mail: Mail{SESQueue: "https://sqs.us-east-1.amazonaws.com/1/wo-inbound", SMTPAddr: "127.0.0.1:2525"}}, "Mail.SMTPAddr"},
		{"ses queue trusts another relay", Config{Mail: Mail{SESQueue: "https://sqs.us-east-1.amazonaws.com/1/wo-inbound", TrustedAuthServ: "mx.example.com"}}, "Mail.TrustedAuthServ"},
		{"trusted authserv without its relay's address", Config{Mail: Mail{TrustedAuthServ: "relay.test"}}, "Mail.TrustedAuthServ"},
		{"trusted relay not an address", Config{Mail: Mail{TrustedAuthServ: "relay.test", TrustedRelays: []string{"relay.example.com"}}}, "Mail.TrustedRelays"},
		{"trusted relay without an authserv-id", Config{Mail: Mail{TrustedRelays: []string{"10.0.0.25"}}}, "Mail.TrustedRelays"},
		{"trusted relay with the ses queue", Config{Mail: Mail{SESQueue: "https://sqs.us-east-1.amazonaws.com/1/wo-inbound", SMTPAddr: "", TrustedRelays: []string{"10.0.0.25"}}}, "Mail.TrustedRelays"},
		{"aws endpoint", Config{AWS: AWS{Endpoint: "localhost:4566"}}, "AWS.Endpoint"},
		{"state archive over the engine's blob limit", Config{Worker: Worker{StateMaxBytes: 65<<20 + 1}}, "Worker.StateMaxBytes"},
		{"preview cache bound", Config{Worker: Worker{PreviewCacheMaxBytes: -1}}, "Worker.PreviewCacheMaxBytes"},
		{"preview target and engine previews", Config{Worker: Worker{Previews: PreviewsEngine, PreviewTarget: "s3://wo-sites"}}, "Worker.PreviewTarget"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Data = t.TempDir()
			var fe *FieldError
			if err := tc.cfg.Validate(); !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("Validate() = %v, want a *FieldError for %s", err, tc.field)
			}
		})
	}
}

func TestValidateFillsDefaultsAndAbsolutePaths(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	c := Config{Data: "rel/data", Worker: Worker{Workspaces: "ws"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"Data": filepath.Join(dir, "rel/data"), "Worker.Workspaces": filepath.Join(dir, "ws"),
		"Worker.State": filepath.Join(dir, "rel/data/state"), "Worker.Previews": filepath.Join(dir, "rel/data/previews"),
		"Engine": "embedded://" + filepath.Join(dir, "rel/data/nats"), "HTTPAddr": DefaultHTTPAddr}
	got := map[string]string{"Data": c.Data, "Worker.Workspaces": c.Worker.Workspaces, "Worker.State": c.Worker.State,
		"Worker.Previews": c.Worker.Previews, "Engine": c.Engine, "HTTPAddr": c.HTTPAddr}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	engine := Config{Data: "rel/data", Worker: Worker{Previews: PreviewsEngine}}
	if err := engine.Validate(); err != nil || engine.Worker.Previews != PreviewsEngine {
		t.Errorf("Worker.Previews %q: expected it kept as is, got %q, %v", PreviewsEngine, engine.Worker.Previews, err)
	}
	if c.Role != RoleServe || c.InterruptPolicy != router.PolicyInterrupt || c.Worker.Sandbox != sandbox.ModeAuto || c.Worker.Processor != ProcessorPipeline {
		t.Errorf("defaults not filled: %+v", c)
	}
	if _, err := os.Stat(filepath.Join(dir, "rel")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Validate wrote to disk: %v", err)
	}
}

func TestDefaultDataDir(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_DATA_HOME", "")
	if d, _ := DefaultDataDir(); d != filepath.Join(home, ".local/share/webordinary") && d != DefaultSystemData {
		t.Errorf("DefaultDataDir() = %q", d)
	}
	t.Setenv("XDG_DATA_HOME", "/srv/xdg")
	if d, _ := DefaultDataDir(); d != "/srv/xdg/webordinary" {
		t.Errorf("with XDG_DATA_HOME: %q", d)
	}
}

// TestBusyAddressFailsBeforeAnythingStarts: a taken address is named, and nothing is
// written or left listening.
func TestBusyAddressFailsBeforeAnythingStarts(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := serveConfig(t)
	cfg.Mail.SMTPAddr = taken.Addr().String()
	err = runApp(t, context.Background(), cfg, nil)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "Mail.SMTPAddr" || !strings.Contains(err.Error(), taken.Addr().String()) {
		t.Fatalf("Run = %v, want the busy SMTP address named", err)
	}
	if _, err := os.Stat(cfg.Data); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the data directory was created: %v", err)
	}
}

// TestSMTPListenerDiesStopsEverything: a component that fails ends Run with its error,
// logged, and every other component stops before the engine closes.
// Not parallel, so that the goroutines checked after it are its own.
func TestSMTPListenerDiesStopsEverything(t *testing.T) {
	cfg := serveConfig(t)
	logs := &syncBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	err := runApp(t, context.Background(), cfg, func(a *App) { _ = a.ln.smtp.Close() })
	if err == nil || !strings.Contains(err.Error(), "SMTP intake") {
		t.Fatalf("Run = %v, want the SMTP intake's failure", err)
	}
	if !strings.Contains(logs.String(), "component failed") {
		t.Errorf("the failure was not logged:\n%s", logs)
	}
	noLeftovers(t)
}

// TestPreviewServerFailsStopsCleanly: the preview server failing at start ends Run, and no
// goroutine keeps running against the closed engine.
// Not parallel (see noLeftovers).
func TestPreviewServerFailsStopsCleanly(t *testing.T) {
	cfg := serveConfig(t)
	cfg.PreviewAddr = "127.0.0.1:0"
	err := runApp(t, context.Background(), cfg, func(a *App) { _ = a.ln.preview.Close() })
	if err == nil || !strings.Contains(err.Error(), "preview server") {
		t.Fatalf("Run = %v, want the preview server's failure", err)
	}
	noLeftovers(t)
}

// TestRunStopsOnCancel: cancelling ctx stops everything and Run returns nil.
func TestRunStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	seen := ""
	if err := runApp(t, ctx, serveConfig(t), func(*App) { seen = ours(); cancel() }); err != nil {
		t.Fatalf("Run after cancel = %v", err)
	}
	if seen == "" {
		t.Fatal("noLeftovers cannot see the components' goroutines while they run")
	}
	noLeftovers(t)
}

// serveConfig is a serve on ephemeral addresses with the embedded engine and noop workers.
func serveConfig(t *testing.T) Config {
	t.Helper()
	return Config{Data: filepath.Join(t.TempDir(), "data"), HTTPAddr: "127.0.0.1:0", EngineListen: "127.0.0.1:0", NoSync: true,
		Mail:   Mail{SMTPAddr: "127.0.0.1:0"},
		Worker: Worker{Count: 2, Processor: ProcessorNoop},
		Logger: slog.New(slog.NewTextHandler(tWriter{t}, nil)), ReadyFile: filepath.Join(t.TempDir(), "ready.json")}
}

// runApp runs cfg; once it is ready (its ready file exists), started gets the App.
func runApp(t *testing.T, ctx context.Context, cfg Config, started func(*App)) error {
	t.Helper()
	a, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	for {
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Millisecond):
		}
		if _, err := os.Stat(cfg.ReadyFile); err == nil && started != nil {
			started(a)
			started = nil
		}
	}
}

// noLeftovers fails when goroutines of our components or of the engine outlive Run.
func noLeftovers(t *testing.T) {
	t.Helper()
	var stacks string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if stacks = ours(); stacks == "" {
			return
		}
	}
	// The callers are not parallel: parallel tests wait until they are done.
	t.Errorf("goroutines still running after Run returned:\n%s", stacks)
}

// ours are the stacks of goroutines of our components, the engine or an HTTP server; "" when none.
func ours() string {
	markers := []string{"internal/router.", "internal/worker.", "internal/mail/", "internal/dashboard.", "nats-server/v2/server.",
		"nats-io/nats.go.", "net/http.(*Server).Serve"}
	buf := make([]byte, 1<<20)
	var out []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		for _, m := range markers {
			if strings.Contains(g, m) {
				out = append(out, g)
				break
			}
		}
	}
	return strings.Join(out, "\n\n")
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
