package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/smtp"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/mail/intake"
)

// TestHeldReleaseAndDrop: two messages a real intake holds (its handler says the sender is
// over a limit unless the message was released) are listed with their subjects on the held
// page; Release has the intake handle one, marked released; Drop removes the other.
func TestHeldReleaseAndDrop(t *testing.T) {
	t.Parallel()
	released := make(chan intake.Envelope, 10)
	s, err := intake.New(intake.Config{Addr: "127.0.0.1:0", Domains: []string{"edit.example.com"}, Spool: t.TempDir(),
		RetryEvery: 50 * time.Millisecond, Logger: testLogger(t),
		Handler: func(_ context.Context, env intake.Envelope, _ []byte) error {
			if !env.Released {
				return fmt.Errorf("%w: rate limited: too many instructions in the last hour from a@example.com", intake.ErrHold)
			}
			released <- env
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for i := range 2 {
		msg := fmt.Sprintf("From: a@example.com\r\nTo: edit@edit.example.com\r\nSubject: Change %d\r\n\r\nMake it green\r\n", i)
		if err := smtp.SendMail(s.Addr().String(), nil, "a@example.com", []string{"edit@edit.example.com"}, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	held := waitHeld(t, s.Held(), 2)
	f := setup(t, options{held: s.Held()})
	res, body := f.get("/held")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, held[0].ID) || !strings.Contains(body, "Change 0") ||
		!strings.Contains(body, "rate limited") {
		t.Fatalf("held page %d:\n%s", res.StatusCode, body)
	}
	token := f.csrf("/held")
	if res, body := f.post("/held/"+held[1].ID+"/drop", url.Values{"csrf": {token}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("drop: %d %s", res.StatusCode, body)
	}
	if res, body := f.post("/held/"+held[0].ID+"/release", url.Values{"csrf": {token}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("release: %d %s", res.StatusCode, body)
	}
	select {
	case env := <-released:
		if env.MailFrom != "a@example.com" {
			t.Fatalf("released envelope %+v", env)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("released message not handled within 10s")
	}
	waitHeld(t, s.Held(), 0)
	if res, _ := f.post("/held/"+held[1].ID+"/release", url.Values{"csrf": {token}}); res.StatusCode != http.StatusNotFound {
		t.Fatalf("release of a dropped message: %d; want 404", res.StatusCode)
	}
}

func waitHeld(t *testing.T, h *intake.Held, n int) []intake.Quarantined {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		held, err := h.List()
		if err != nil {
			t.Fatal(err)
		}
		if len(held) == n {
			return held
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d held; want %d", len(held), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
