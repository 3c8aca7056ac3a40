package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/smtp"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/mail/intake"
	"github.com/webordinary/webordinary/internal/mail/message"
)

// TestQuarantineReleaseAndDelete: two hostile messages sent over SMTP to a real intake are
// listed on the quarantine page; Release (after the depth limit is raised) has the intake
// handle one, Delete removes the other.
func TestQuarantineReleaseAndDelete(t *testing.T) {
	t.Parallel()
	var maxDepth atomic.Int64
	handled := make(chan struct{}, 10)
	s, err := intake.New(intake.Config{Addr: "127.0.0.1:0", Domains: []string{"edit.example.com"}, Spool: t.TempDir(),
		RetryEvery: 50 * time.Millisecond, Logger: testLogger(t),
		Handler: func(ctx context.Context, _ intake.Envelope, raw []byte) error {
			if _, err := message.ParseContext(ctx, raw, message.Limits{MaxDepth: int(maxDepth.Load())}); err != nil {
				return fmt.Errorf("%w: %w", intake.ErrQuarantine, err)
			}
			handled <- struct{}{}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	raw, err := os.ReadFile(filepath.Join("..", "mail", "message", "testdata", "hostile_nested.eml"))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := smtp.SendMail(s.Addr().String(), nil, "x@evil.example", []string{"edit@edit.example.com"}, raw); err != nil {
			t.Fatal(err)
		}
	}
	q := waitQuarantine(t, s, 2)
	f := setup(t, options{quarantine: s})
	res, body := f.get("/quarantine")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, q[0].ID) || !strings.Contains(body, "x@evil.example") ||
		!strings.Contains(body, "parse budget") {
		t.Fatalf("quarantine page %d:\n%s", res.StatusCode, body)
	}
	token := f.csrf("/quarantine")
	if res, body := f.post("/quarantine/"+q[1].ID+"/delete", url.Values{"csrf": {token}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete: %d %s", res.StatusCode, body)
	}
	if res, _ := f.post("/quarantine/"+q[0].ID+"/release", url.Values{}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("release without a form token: %d; want 403", res.StatusCode)
	}
	maxDepth.Store(40)
	if res, body := f.post("/quarantine/"+q[0].ID+"/release", url.Values{"csrf": {token}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("release: %d %s", res.StatusCode, body)
	}
	select {
	case <-handled:
	case <-time.After(10 * time.Second):
		t.Fatal("released message not handled within 10s")
	}
	waitQuarantine(t, s, 0)
	if res, _ := f.post("/quarantine/"+q[1].ID+"/release", url.Values{"csrf": {token}}); res.StatusCode != http.StatusNotFound {
		t.Fatalf("release of a deleted message: %d; want 404", res.StatusCode)
	}
}

func waitQuarantine(t *testing.T, s *intake.Server, n int) []intake.Quarantined {
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
			t.Fatal(errors.New("quarantine did not reach the expected size"), len(q), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
