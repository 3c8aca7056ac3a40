package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// parkedReplies lists the parked replies through the CLI.
func (m *mailSetup) parkedReplies(t *testing.T) []map[string]any {
	t.Helper()
	var parked []map[string]any
	if err := json.Unmarshal([]byte(m.c.cli(t, "mail", "replies", "--server", m.c.api, "--json")), &parked); err != nil {
		t.Fatal(err)
	}
	return parked
}

// TestAParkedReplyIsSentAgainFromTheCommandLine: the relay refuses the owner's address for
// good, so the reply is parked, not lost; the operator sees it with `mail replies`, and once
// the relay takes it again `mail replies retry all` sends it, once. status counts it meanwhile.
func TestAParkedReplyIsSentAgainFromTheCommandLine(t *testing.T) {
	t.Parallel()
	m := newMailSetup(t)
	m.sink.refuse.Store(true)
	m.swaks(t, m.signed(t, "refused@example.com", "Fresh bread daily"))
	waitFor(t, "the refused reply to be parked", 90*time.Second, func() bool { return len(m.parkedReplies(t)) == 1 })
	p := m.parkedReplies(t)[0]
	if !strings.Contains(p["error"].(string), "550") || p["subject"] != "Re: Our homepage" {
		t.Fatalf("parked reply as listed: %v", p)
	}
	if out := m.c.cli(t, "mail", "replies", "--server", m.c.api); !strings.Contains(out, "Re: Our homepage") {
		t.Fatalf("the list does not show the reply:\n%s", out)
	}
	if out := m.c.cli(t, "status", "--server", m.c.api); !strings.Contains(out, "PARKED REPLIES: 1 could not be sent") {
		t.Fatalf("status does not say a reply is parked:\n%s", out)
	}

	m.sink.refuse.Store(false)
	m.c.cli(t, "mail", "replies", "retry", "all", "--server", m.c.api)
	replies := m.sink.received(t, 1, 60*time.Second)
	if len(replies) != 1 || !strings.Contains(string(replies[0]), "In-Reply-To: <refused@example.com>") {
		t.Fatalf("%d replies after the retry; want the parked one", len(replies))
	}
	if left := m.parkedReplies(t); len(left) != 0 {
		t.Fatalf("still parked after the retry: %v", left)
	}
	var st struct {
		ParkedReplies *int `json:"parkedReplies"`
	}
	if err := json.Unmarshal([]byte(m.c.cli(t, "status", "--server", m.c.api, "--json")), &st); err != nil || st.ParkedReplies != nil {
		t.Fatalf("status after the retry: parked %v, %v; want none", st.ParkedReplies, err)
	}
	m.c.fails(t, "no such parked reply", "mail", "replies", "drop", p["id"].(string), "--server", m.c.api)
	if got := m.sink.received(t, 2, time.Second); len(got) != 1 {
		t.Fatalf("%d replies; the retried one went out more than once", len(got))
	}
}
