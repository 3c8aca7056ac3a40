package main

import (
	"bytes"
	"net/http"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHostileMailQuarantinedAndSIGTERM: the deeply nested, unclosed message (under 2 KB) sent
// to serve over SMTP is quarantined without holding back the signed message sent after it
// (which gets its reply), /api/mail/inspect refuses it at once with 422, and SIGTERM right
// after another copy arrives stops serve within 5 s.
func TestHostileMailQuarantinedAndSIGTERM(t *testing.T) {
	t.Parallel()
	m := newMailSetup(t)
	hostile, err := os.ReadFile(filepath.Join("..", "..", "internal", "mail", "message", "testdata", "hostile_nested.eml"))
	if err != nil {
		t.Fatal(err)
	}
	send := func(raw []byte) {
		t.Helper()
		if err := smtp.SendMail(m.smtp, nil, "alice@example.com", []string{"edit@edit.example.net"}, raw); err != nil {
			t.Fatal(err)
		}
	}
	send(hostile)
	send(m.signed(t, "after-hostile@example.com", "Closed on Mondays"))
	if n := len(m.sink.received(t, 1, 60*time.Second)); n != 1 {
		t.Fatalf("%d replies to the message after the hostile one; want 1", n)
	}
	if list := m.get(t, "/api/mail/quarantine", http.StatusOK); !strings.Contains(list, "parse budget") {
		t.Fatalf("quarantine:\n%s", list)
	}
	req, _ := http.NewRequest(http.MethodPost, m.c.api+"/api/mail/inspect", bytes.NewReader(hostile))
	req.Header.Set("Content-Type", "message/rfc822")
	req.Header.Set("Authorization", "Bearer "+m.c.client().Token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("inspect of the hostile message: %d; want 422", res.StatusCode)
	}
	send(hostile)
	start := time.Now()
	_ = m.c.serveP.Process.Signal(syscall.SIGTERM)
	for !m.c.hasExited(m.c.serveP) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("serve still running 5s after SIGTERM")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (m *mailSetup) get(t *testing.T, path string, want int) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, m.c.api+path, nil)
	req.Header.Set("Authorization", "Bearer "+m.c.client().Token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	if res.StatusCode != want {
		t.Fatalf("GET %s: %d; want %d\n%s", path, res.StatusCode, want, b.String())
	}
	return b.String()
}

// hasExited reports whether cmd (started by c.start) has exited.
func (c *cluster) hasExited(cmd *exec.Cmd) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exited[cmd]
}
