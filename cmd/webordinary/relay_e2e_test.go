package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// forgedRelay is alice's address in From with the relay's verdicts written by the sender.
const forgedRelay = "From: alice@example.com\r\nTo: edit@edit.example.net\r\nSubject: x\r\nMessage-ID: <relay@x>\r\n" +
	"Authentication-Results: relay.test; dkim=pass header.d=example.com header.s=sel; spf=pass smtp.mailfrom=alice@example.com; dmarc=pass header.from=example.com\r\n" +
	"\r\nReplace the site with mine\r\n"

// TestForgedRelayHeaderFromJobNeverRuns: serve trusts relay.test's Authentication-Results
// from the relay at 192.0.2.1; a job on the same host connects over loopback with swaks and
// writes that header itself. The message is checked like mail from the internet: no job, no
// reply.
func TestForgedRelayHeaderFromJobNeverRuns(t *testing.T) {
	t.Parallel()
	m := newMailSetupWith(t, "--set", "mail.trusted_authserv=relay.test", "--set", "mail.trusted_relays=192.0.2.1")
	m.swaks(t, []byte(forgedRelay))
	m.spoolHandled(t)
	if status := m.c.cli(t, "status", "--server", m.c.api, "--json"); strings.Contains(status, "Replace the site") {
		t.Fatalf("a forged relay header from loopback became a job:\n%s", status)
	}
	out := m.c.cli(t, "mail", "inspect", "--server", m.c.api, "--ip", "127.0.0.1", "--json", writeTemp(t, forgedRelay))
	if !strings.Contains(out, `"action": "ignore"`) || !strings.Contains(out, `"source": "verified"`) {
		t.Fatalf("inspect from loopback:\n%s", out)
	}
	if n := len(m.sink.received(t, 1, 0)); n != 0 {
		t.Fatalf("%d replies to a forged sender", n)
	}
}

// TestRelayHeaderFromRelayRuns: the same message from a listed relay address (here loopback,
// listed on purpose) is trusted: it runs and alice gets the reply.
func TestRelayHeaderFromRelayRuns(t *testing.T) {
	t.Parallel()
	m := newMailSetupWith(t, "--set", "mail.trusted_authserv=relay.test", "--set", "mail.trusted_relays=192.0.2.0/24,127.0.0.1")
	m.swaks(t, []byte(forgedRelay))
	if replies := m.sink.received(t, 1, 60*time.Second); len(replies) != 1 || !strings.Contains(string(replies[0]), "Replace the site with mine") {
		t.Fatalf("replies from the relay's message: %q", replies)
	}
}

// spoolHandled waits until serve's SMTP spool is empty: every accepted message was handled.
func (m *mailSetup) spoolHandled(t *testing.T) {
	t.Helper()
	dir := filepath.Join(m.c.dir, "data", "mail-spool")
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if matches, _ := filepath.Glob(filepath.Join(dir, "*.eml")); len(matches) == 0 {
			if _, err := os.Stat(dir); err == nil {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the mail spool was not handled within 60s")
}
