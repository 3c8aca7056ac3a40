package intake_test

import (
	"context"
	"errors"
	"fmt"
	"net/smtp"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/mail/intake"
	"github.com/webordinary/webordinary/internal/mail/message"
)

// parsing is a handler that parses with the real parser, like inbound does: a message over the
// budget is quarantined. maxDepth can be raised while it runs.
type parsing struct {
	*received
	maxDepth atomic.Int64
}

func (p *parsing) handler(ctx context.Context, env intake.Envelope, raw []byte) error {
	_, err := message.ParseContext(ctx, raw, message.Limits{MaxDepth: int(p.maxDepth.Load())})
	if errors.Is(err, message.ErrBudget) || errors.Is(err, message.ErrMalformed) {
		return fmt.Errorf("%w: %w", intake.ErrQuarantine, err)
	}
	if err != nil {
		return err
	}
	return p.received.handler(ctx, env, raw)
}

func hostile(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "message", "testdata", "hostile_nested.eml"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func startServer(t *testing.T, spool string, h intake.Handler) *intake.Server {
	t.Helper()
	s, err := intake.New(intake.Config{Addr: "127.0.0.1:0", Domains: []string{"edit.example.com"}, Spool: spool,
		Handler: h, RetryEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

func send(t *testing.T, addr, from string, raw []byte) {
	t.Helper()
	if err := smtp.SendMail(addr, nil, from, []string{"edit@edit.example.com"}, raw); err != nil {
		t.Fatal(err)
	}
}

// TestHostileMessageQuarantinedNextHandled: the deeply nested unclosed message, over real
// SMTP, is set aside within a bounded time and the normal message sent after it is handled.
// Released after the depth limit is raised, it is handled; a deleted one is gone.
func TestHostileMessageQuarantinedNextHandled(t *testing.T) {
	t.Parallel()
	p := &parsing{received: newReceived()}
	s := startServer(t, t.TempDir(), p.handler)
	addr := s.Addr().String()
	send(t, addr, "x@evil.example", hostile(t))
	send(t, addr, "x@evil.example", hostile(t))
	send(t, addr, "alice@example.com", []byte(msg))
	wait(t, p.received, 1)
	q := waitQuarantined(t, s, 2)
	if q[0].MailFrom != "x@evil.example" || q[0].Size != int64(len(hostile(t))) || q[0].ReceivedAt.IsZero() ||
		!strings.Contains(q[0].Reason, "parse budget") || q[0].Rcpt[0] != "edit@edit.example.com" {
		t.Fatalf("quarantined: %+v", q[0])
	}
	if err := s.Delete(q[1].ID); err != nil {
		t.Fatal(err)
	}
	p.maxDepth.Store(40)
	if err := s.Release(q[0].ID); err != nil {
		t.Fatal(err)
	}
	wait(t, p.received, 1)
	if left := waitQuarantined(t, s, 0); len(left) != 0 {
		t.Fatalf("still quarantined: %+v", left)
	}
	for _, bad := range []string{q[1].ID, "../../etc/passwd", ""} {
		if err := s.Release(bad); !errors.Is(err, intake.ErrNotQuarantined) {
			t.Errorf("Release(%q) = %v; want ErrNotQuarantined", bad, err)
		}
		if err := s.Delete(bad); !errors.Is(err, intake.ErrNotQuarantined) {
			t.Errorf("Delete(%q) = %v; want ErrNotQuarantined", bad, err)
		}
	}
}

// TestQuarantineSurvivesRestart: a quarantined message stays aside (is not handled) after a
// restart on the same spool.
func TestQuarantineSurvivesRestart(t *testing.T) {
	t.Parallel()
	spool := t.TempDir()
	quarantine := func(context.Context, intake.Envelope, []byte) error {
		return fmt.Errorf("%w: test", intake.ErrQuarantine)
	}
	s := startServer(t, spool, quarantine)
	send(t, s.Addr().String(), "x@evil.example", []byte(msg))
	waitQuarantined(t, s, 1)
	r := newReceived()
	s2 := startServer(t, spool, r.handler)
	send(t, s2.Addr().String(), "alice@example.com", []byte(msg))
	wait(t, r, 1)
	if q, _ := s2.Quarantined(); len(q) != 1 || len(r.msgs) != 1 {
		t.Fatalf("after restart: %d quarantined, %d handled", len(q), len(r.msgs))
	}
}

// TestNullSenderInEnvelope: MAIL FROM:<> is recorded as a null reverse-path.
func TestNullSenderInEnvelope(t *testing.T) {
	t.Parallel()
	r := newReceived()
	addr, _ := start(t, t.TempDir(), r.handler, 0)
	send(t, addr, "", []byte(msg))
	send(t, addr, "alice@example.com", []byte(msg))
	wait(t, r, 2)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.envs[0].NullSender || r.envs[0].MailFrom != "" || r.envs[1].NullSender {
		t.Fatalf("envelopes: %+v", r.envs)
	}
}

// waitQuarantined waits up to 10s for n quarantined messages.
func waitQuarantined(t *testing.T, s *intake.Server, n int) []intake.Quarantined {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		q, err := s.Quarantined()
		if err != nil {
			t.Fatal(err)
		}
		if len(q) == n {
			return q
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d quarantined after 10s; want %d: %+v", len(q), n, q)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStopWhileHandlingKeepsTheMessage: Run returns promptly when ctx ends while the handler
// is busy (it returns on ctx), and the message interrupted that way is not quarantined: it is
// handled at the next start.
func TestStopWhileHandlingKeepsTheMessage(t *testing.T) {
	t.Parallel()
	spool := t.TempDir()
	busy := make(chan struct{}, 1)
	stuck := func(ctx context.Context, _ intake.Envelope, raw []byte) error {
		busy <- struct{}{}
		<-ctx.Done()
		return fmt.Errorf("%w: interrupted: %w", intake.ErrQuarantine, ctx.Err())
	}
	addr, stop := start(t, spool, stuck, 0)
	send(t, addr, "alice@example.com", []byte(msg))
	<-busy
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return within 5s of ctx ending")
	}
	r := newReceived()
	s := startServer(t, spool, r.handler)
	wait(t, r, 1)
	if q, _ := s.Quarantined(); len(q) != 0 {
		t.Fatalf("a message interrupted by shutdown was quarantined: %+v", q)
	}
}
