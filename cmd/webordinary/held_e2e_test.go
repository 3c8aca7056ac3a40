package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/smtp"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"
	"github.com/jhillyerd/enmime/v2"
)

// burstMessage is alice's n-th message of a burst, DKIM-signed.
func (m *mailSetup) burstMessage(t *testing.T, n int) []byte {
	t.Helper()
	raw := fmt.Sprintf("From: Alice <alice@example.com>\r\nTo: edit@edit.example.net\r\nSubject: Burst %03d\r\n"+
		"Message-ID: <burst%03d@example.com>\r\nDate: %s\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"+
		"Change number %d\r\n", n, n, time.Now().Format(time.RFC1123Z), n)
	var out bytes.Buffer
	if err := dkim.Sign(&out, strings.NewReader(raw), &dkim.SignOptions{Domain: "example.com", Selector: "sel", Signer: m.key}); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// sendBurst sends alice's messages 1..n over one SMTP connection.
func (m *mailSetup) sendBurst(t *testing.T, n int) {
	t.Helper()
	c, err := smtp.Dial(m.smtp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 1; i <= n; i++ {
		if err := c.Mail("alice@example.com"); err != nil {
			t.Fatalf("message %d: MAIL: %v", i, err)
		}
		if err := c.Rcpt("edit@edit.example.net"); err != nil {
			t.Fatalf("message %d: RCPT: %v", i, err)
		}
		w, err := c.Data()
		if err != nil {
			t.Fatalf("message %d: DATA: %v", i, err)
		}
		if _, err := w.Write(m.burstMessage(t, i)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("message %d not accepted: %v", i, err)
		}
	}
	_ = c.Quit()
}

// replyTexts reads every reply the sink holds: In-Reply-To → texts, and the held notices.
func replyTexts(t *testing.T, raws [][]byte) (done map[string]int, notices []string) {
	t.Helper()
	done = map[string]int{}
	for _, raw := range raws {
		env, err := enmime.ReadEnvelope(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(env.Text, "held") && strings.Contains(env.Text, "Burst") {
			notices = append(notices, env.Text)
			continue
		}
		done[strings.Trim(env.GetHeader("In-Reply-To"), "<>")]++
	}
	return done, notices
}

// heldCount lists the held mail through the CLI.
func (m *mailSetup) heldCount(t *testing.T) int {
	t.Helper()
	var held []map[string]any
	if err := json.Unmarshal([]byte(m.c.cli(t, "mail", "held", "--server", m.c.api, "--json")), &held); err != nil {
		t.Fatal(err)
	}
	return len(held)
}

// TestBurstIsAdmittedOrHeldNeverDropped: 200 instructions from one valid owner in a burst over
// real SMTP, with a limit of 20 an hour. Every message is either run (20) or held (180); the
// owner gets exactly one notice listing the held ones, not one per message; the operator
// releases them and every one of the 200 runs and is answered once.
func TestBurstIsAdmittedOrHeldNeverDropped(t *testing.T) {
	t.Parallel()
	const burst, limit = 200, 20
	m := newMailSetupWith(t, "--set", "worker.processor=command", "--set", "worker.agent_command=echo done", "--set", "mail.per_sender="+fmt.Sprint(limit),
		"--set", "mail.per_tenant=1000", "--set", "mail.held_notice_after=1s")
	start := time.Now()
	m.sendBurst(t, burst)
	t.Logf("%d messages accepted over SMTP in %s", burst, time.Since(start).Round(time.Millisecond))

	waitFor(t, "the over-limit messages to be held", 120*time.Second, func() bool { return m.heldCount(t) == burst-limit })
	raws := m.sink.received(t, limit+1, 120*time.Second)
	done, notices := replyTexts(t, raws)
	if len(done) != limit || len(notices) != 1 {
		t.Fatalf("before release: %d answered, %d held notices; want %d and 1", len(done), len(notices), limit)
	}
	t.Logf("held notice:\n%s", notices[0])
	for _, want := range []string{"Burst 021", fmt.Sprintf("Burst %03d", burst), fmt.Sprint(burst - limit)} {
		if !strings.Contains(notices[0], want) {
			t.Fatalf("the notice does not mention %q:\n%s", want, notices[0])
		}
	}

	var st struct {
		HeldMail []struct{ Subject string } `json:"heldMail"`
	}
	if err := json.Unmarshal([]byte(m.c.cli(t, "status", "--server", m.c.api, "--json")), &st); err != nil || len(st.HeldMail) != burst-limit {
		t.Fatalf("status lists %d held messages (%v); want %d", len(st.HeldMail), err, burst-limit)
	}
	m.c.cli(t, "mail", "held", "release", "all", "--server", m.c.api)
	raws = m.sink.received(t, burst+1, 180*time.Second)
	done, notices = replyTexts(t, raws)
	for i := 1; i <= burst; i++ {
		if id := fmt.Sprintf("burst%03d@example.com", i); done[id] != 1 {
			t.Errorf("message %s was answered %d times; want once", id, done[id])
		}
	}
	if len(notices) != 1 || m.heldCount(t) != 0 {
		t.Fatalf("after release: %d notices, %d still held; want 1 and 0", len(notices), m.heldCount(t))
	}
	t.Logf("%d messages: %d run at once, %d held then released and run; %d replies in %s",
		burst, limit, burst-limit, len(raws), time.Since(start).Round(time.Millisecond))
}

// waitFor polls cond until it holds; it fails the test after within.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
