package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"
	"github.com/jhillyerd/enmime/v2"
)

// signedReply is a DKIM-signed reply from alice on the thread of the message inReplyTo.
func (m *mailSetup) signedReply(t *testing.T, id, inReplyTo, body string) []byte {
	t.Helper()
	raw := fmt.Sprintf("From: Alice <alice@example.com>\r\nTo: edit@edit.example.net\r\nSubject: Re: Our homepage\r\n"+
		"Message-ID: <%s>\r\nIn-Reply-To: <%s>\r\nReferences: <%s>\r\nDate: %s\r\nMIME-Version: 1.0\r\n"+
		"Content-Type: text/plain; charset=utf-8\r\n\r\n%s\r\n", id, inReplyTo, inReplyTo, time.Now().Format(time.RFC1123Z), body)
	var out bytes.Buffer
	if err := dkim.Sign(&out, strings.NewReader(raw), &dkim.SignOptions{Domain: "example.com", Selector: "sel", Signer: m.key}); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// reply waits for the n-th reply (1-based) and returns its subject and text.
func (m *mailSetup) reply(t *testing.T, n int) string {
	t.Helper()
	replies := m.sink.received(t, n, 90*time.Second)
	if len(replies) < n {
		t.Fatalf("%d replies; want %d", len(replies), n)
	}
	env, err := enmime.ReadEnvelope(bytes.NewReader(replies[n-1]))
	if err != nil {
		t.Fatal(err)
	}
	return env.Text
}

// TestPublishAndUndoOverMail: over real SMTP, alice's edit is answered with a preview and an
// offer to publish; her reply "Looks good, publish it" merges the thread into main and puts
// the site live on the project's host; "undo" takes it back; "publish" on a new thread is
// refused (only a thread's owner publishes that thread).
func TestPublishAndUndoOverMail(t *testing.T) {
	t.Parallel()
	m := newMailSetup(t)
	m.swaks(t, m.signed(t, "edit1@example.com", "Fresh bread daily"))
	done := m.reply(t, 1)
	if !strings.Contains(done, "ready to look at") || !strings.Contains(done, `Reply "publish"`) {
		t.Fatalf("edit reply:\n%s", done)
	}
	t.Logf("reply 1 (edit):\n%s", done)

	m.swaks(t, m.signedReply(t, "pub1@example.com", "edit1@example.com", "Looks good, publish it"))
	pub := m.reply(t, 2)
	t.Logf("reply 2 (publish):\n%s", pub)
	live := between(pub, "live at http://site.localhost:", "/")
	if live == "" || !strings.Contains(pub, "See the live site") {
		t.Fatalf("publish reply has no live URL:\n%s", pub)
	}
	if body := fetchPreview(t, "site.localhost:"+live); !strings.Contains(body, "Fresh bread daily") {
		t.Fatalf("live site serves %q", body)
	}
	if main := gitOut(t, m.origin, "show", "main:index.html"); !strings.Contains(main, "Fresh bread daily") {
		t.Fatalf("main after publish: %q", main)
	}

	m.swaks(t, m.signedReply(t, "undo1@example.com", "pub1@example.com", "undo"))
	undo := m.reply(t, 3)
	t.Logf("reply 3 (undo):\n%s", undo)
	if !strings.Contains(undo, "undid the last publish") {
		t.Fatalf("undo reply:\n%s", undo)
	}
	if body := fetchPreview(t, "site.localhost:"+live); !strings.Contains(body, "Hello") {
		t.Fatalf("live site after undo serves %q", body)
	}
	if main := gitOut(t, m.origin, "show", "main:index.html"); !strings.Contains(main, "Hello") {
		t.Fatalf("main after undo: %q", main)
	}

	m.swaks(t, m.signed(t, "pub2@example.com", "publish"))
	refused := m.reply(t, 4)
	t.Logf("reply 4 (publish on a new thread):\n%s", refused)
	if !strings.Contains(refused, "didn't act") || !strings.Contains(refused, "reply to the email about the changes") {
		t.Fatalf("publish without a thread:\n%s", refused)
	}

	// The signed link: GET only asks, POST publishes once, a forged or reused link does nothing.
	m.swaks(t, m.signed(t, "edit2@example.com", "Open on Sundays"))
	link := strings.TrimSpace(between(m.reply(t, 5), "Publish now: ", "\n"))
	if !strings.Contains(link, "/publish/") {
		t.Fatalf("no publish link in reply 5:\n%s", m.reply(t, 5))
	}
	if code, body := linkRequest(t, http.MethodGet, link); code != 200 || !strings.Contains(body, "<form method=\"post\">") {
		t.Fatalf("GET link: %d %s", code, body)
	}
	// The thread page is served without the operator's token.
	page := strings.TrimSpace(between(m.reply(t, 5), "Everything about this request: ", "\n"))
	if code, body := linkRequest(t, http.MethodGet, page); code != 200 || !strings.Contains(body, "Open on Sundays") || !strings.Contains(body, "See the preview") {
		t.Fatalf("GET thread page %s: %d %s", page, code, body)
	}
	revokeThreadLinks(t, m.c, page)
	if code, body := linkRequest(t, http.MethodGet, page); code != http.StatusForbidden || !strings.Contains(body, "turned off") {
		t.Fatalf("GET revoked thread page: %d %s", code, body)
	}
	forged := link[:len(link)-1] + "0" // one hex digit of the signature changed
	if strings.HasSuffix(link, "0") {
		forged = link[:len(link)-1] + "1"
	}
	if code, _ := linkRequest(t, http.MethodPost, forged); code != http.StatusForbidden {
		t.Fatalf("a forged link answered %d", code)
	}
	if code, body := linkRequest(t, http.MethodPost, link); code != 200 || !strings.Contains(body, "Publishing") {
		t.Fatalf("POST link: %d %s", code, body)
	}
	pub2 := m.reply(t, 6)
	t.Logf("reply 6 (publish by link):\n%s", pub2)
	if !strings.Contains(pub2, "are live at") || !strings.Contains(fetchPreview(t, "site.localhost:"+live), "Open on Sundays") {
		t.Fatalf("publish by link:\n%s", pub2)
	}
	if code, body := linkRequest(t, http.MethodPost, link); code != http.StatusForbidden || !strings.Contains(body, "already been used") {
		t.Fatalf("reused link: %d %s", code, body)
	}
}

func linkRequest(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// revokeThreadLinks asks the API, as the operator, to turn off the links to the thread that
// page (a thread page link) names.
func revokeThreadLinks(t *testing.T, c *cluster, page string) {
	t.Helper()
	payload, _, _ := strings.Cut(page[strings.LastIndex(page, "/t/")+3:], ".")
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	fields := strings.Fields(string(raw))
	if err != nil || len(fields) != 5 {
		t.Fatalf("thread link payload %q: %v", raw, err)
	}
	req, _ := http.NewRequest(http.MethodPost, c.api+"/api/threads/"+fields[2]+"/revoke-links", nil)
	req.Header.Set("Authorization", "Bearer "+c.client().Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke the thread's links: %s", resp.Status)
	}
}
