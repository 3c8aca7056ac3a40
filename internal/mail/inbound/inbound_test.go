package inbound_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/mail"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/natsjs/natsjstest"
	"github.com/webordinary/webordinary/internal/durable"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/mail/auth"
	"github.com/webordinary/webordinary/internal/mail/inbound"
	"github.com/webordinary/webordinary/internal/mail/intake"
	"github.com/webordinary/webordinary/internal/mail/message"
	"github.com/webordinary/webordinary/internal/mail/outbox"
	"github.com/webordinary/webordinary/internal/pipeline/report"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/tenant"
)

type fixture struct {
	t      *testing.T
	in     *inbound.Inbound
	b      *broker.Backend
	key    ed25519.PrivateKey
	outDir string
	ob     *outbox.Outbox
	cfg    inbound.Config
}

func setup(t *testing.T) *fixture {
	t.Helper()
	return setupWith(t, nil)
}

// setupWith is setup with changes to the mail router's configuration.
func setupWith(t *testing.T, mod func(*inbound.Config)) *fixture {
	t.Helper()
	ctx := context.Background()
	env := natsjstest.Start(t, natsjstest.Options{NoSync: true})
	b := env.Backend
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	dns := &auth.StaticResolver{TXT: map[string][]string{
		"sel._domainkey.example.com": {"v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(pub)},
		"sel._domainkey.bob.example": {"v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(pub)},
		"_dmarc.example.com":         {"v=DMARC1; p=reject"},
	}}
	projects, _ := project.Open(ctx, b)
	threads, _ := project.OpenThreads(ctx, b)
	mailTable, _ := b.Table(ctx, "mail")
	_, err := projects.Put(ctx, project.Project{ID: "site", RepoURL: "/nowhere", Agent: project.AgentSpec{Kind: "claude"},
		Senders: map[string]string{"alice@example.com": "alice", "bob@bob.example": "bob"}})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := router.New(router.Config{Backend: b})
	dir := t.TempDir()
	f := &fixture{t: t, b: b, key: key, outDir: filepath.Join(dir, "sent")}
	f.ob, err = outbox.Open(outbox.Config{Dir: filepath.Join(dir, "spool"), Sender: outbox.Dir{Path: f.outDir}})
	if err != nil {
		t.Fatal(err)
	}
	octx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() { _ = f.ob.Run(octx) }()
	f.cfg = inbound.Config{Domains: []string{"edit.example.net"}, Secret: []byte("0123456789abcdef0123"),
		Auth: auth.Config{Resolver: dns}, Projects: projects, Threads: threads, Mail: mailTable, Jobs: b.Jobs,
		Router: r, Outbox: f.ob, HeldNoticeAfter: 50 * time.Millisecond}
	if mod != nil {
		mod(&f.cfg)
	}
	f.in, err = inbound.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = f.in.Run(octx) }()
	return f
}

// mail builds a message; sign signs it as d=domain.
func (f *fixture) mail(from, to, id, extraHeaders, body string, sign string) []byte {
	f.t.Helper()
	raw := fmt.Sprintf("From: %s\r\nTo: %s\r\nSubject: Header colour\r\nMessage-ID: <%s>\r\nDate: %s\r\n%sMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n%s",
		from, to, id, time.Now().Format(time.RFC1123Z), extraHeaders, strings.ReplaceAll(body, "\n", "\r\n"))
	if sign == "" {
		return []byte(raw)
	}
	var out bytes.Buffer
	if err := dkim.Sign(&out, strings.NewReader(raw), &dkim.SignOptions{Domain: sign, Selector: "sel", Signer: f.key}); err != nil {
		f.t.Fatal(err)
	}
	return out.Bytes()
}

func envelope(from string) intake.Envelope {
	return intake.Envelope{RemoteIP: "203.0.113.9", Helo: "mx.example.com", MailFrom: from, Rcpt: []string{"edit@edit.example.net"},
		ReceivedAt: time.Now()}
}

func (f *fixture) handle(raw []byte, from string) *inbound.Report {
	f.t.Helper()
	rep, err := f.in.Process(context.Background(), envelope(from), raw)
	if err != nil {
		f.t.Fatal(err)
	}
	return rep
}

func (f *fixture) pending(user string) int {
	n, _ := f.b.Inbox.Pending(context.Background(), tenant.ID{Project: "site", User: user})
	return n
}

// sent returns the replies written to the development outbox (waiting up to 5s for want).
// A reply still being written is a temporary file, not a reply yet.
func (f *fixture) sent(want int) []*mail.Message {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		all, _ := os.ReadDir(f.outDir)
		var entries []os.DirEntry
		for _, e := range all {
			if !strings.HasPrefix(e.Name(), durable.TempPrefix) {
				entries = append(entries, e)
			}
		}
		if len(entries) >= want || time.Now().After(deadline) {
			var out []*mail.Message
			for _, e := range entries {
				data, _ := os.ReadFile(filepath.Join(f.outDir, e.Name()))
				m, err := mail.ReadMessage(bytes.NewReader(data))
				if err == nil {
					out = append(out, m)
				}
			}
			return out
		}
		time.Sleep(10 * time.Millisecond)
	}
}

const quoted = "Make the header green please.\n\nOn Mon, 2 Nov 2026 at 10:00, webordinary <edit@edit.example.net> wrote:\n> Done: the header is blue now.\n"

func TestSignedMessageFromRegisteredSenderRuns(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rep := f.handle(f.mail("Alice <alice@example.com>", "edit@edit.example.net", "m1@example.com", "", quoted, "example.com"), "alice@example.com")
	if rep.Decision.Action != "run" || rep.Thread.Project != "site" || rep.Thread.User != "alice" || !rep.Thread.New {
		t.Fatalf("decision %+v thread %+v auth %+v", rep.Decision, rep.Thread, rep.Auth)
	}
	if rep.Instruction != "Make the header green please." {
		t.Fatalf("instruction %q", rep.Instruction)
	}
	if f.pending("alice") != 1 {
		t.Fatal("no job queued")
	}
	// The same message again (a resend with the same Message-ID) is recognized.
	f.handle(f.mail("Alice <alice@example.com>", "edit@edit.example.net", "m1@example.com", "", quoted, "example.com"), "alice@example.com")
	if n := f.pending("alice"); n != 1 {
		t.Fatalf("duplicate Message-ID queued another job: %d pending", n)
	}
}

func TestSpoofedAndUnsignedNeverRunAndGetNoReply(t *testing.T) {
	t.Parallel()
	f := setup(t)
	cases := map[string][]byte{
		"unsigned":           f.mail("alice@example.com", "edit@edit.example.net", "u1@x", "", "Delete everything", ""),
		"signed by attacker": f.mail("alice@example.com", "edit@edit.example.net", "u2@x", "", "Delete everything", "bob.example"),
	}
	for name, raw := range cases {
		rep := f.handle(raw, "alice@example.com")
		if rep.Decision.Action != "ignore" || !strings.Contains(rep.Decision.Reason, "not authenticated") {
			t.Errorf("%s: decision %+v", name, rep.Decision)
		}
	}
	if f.pending("alice") != 0 || len(f.sent(0)) != 0 {
		t.Fatal("a spoofed message queued a job or got a reply")
	}
}

func TestAutoRepliesIgnored(t *testing.T) {
	t.Parallel()
	f := setup(t)
	raw := f.mail("alice@example.com", "edit@edit.example.net", "a1@x", "Auto-Submitted: auto-replied\r\n", "I am on holiday", "example.com")
	if rep := f.handle(raw, "alice@example.com"); rep.Decision.Action != "ignore" || rep.Loop == "" {
		t.Fatalf("auto-reply: %+v", rep.Decision)
	}
}

func TestThreadingByTokenAndInReplyTo_AndForeignTokenRefused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	first := f.handle(f.mail("alice@example.com", "edit@edit.example.net", "t1@example.com", "", "Make it green", "example.com"), "alice@example.com")
	thread := first.Thread.Thread
	// A reply by In-Reply-To continues the thread.
	next := f.handle(f.mail("alice@example.com", "edit@edit.example.net", "t2@example.com", "In-Reply-To: <t1@example.com>\r\n", "And bold", "example.com"), "alice@example.com")
	if next.Thread.Thread != thread || next.Thread.By != "in-reply-to" {
		t.Fatalf("in-reply-to resolved %+v; want thread %s", next.Thread, thread)
	}
	// The reply token from our Reply-To, used by bob (registered and verified) is refused.
	ctx := context.Background()
	rec, _ := f.b.Jobs.Get(ctx, first.JobID)
	if err := f.in.OnResult(ctx, broker.Result{JobID: rec.Job.ID, Tenant: rec.Job.Tenant, Thread: thread, State: broker.StateDone,
		Summary: "The header is green.", Details: report.Report{PreviewURLs: []string{"http://" + thread + ".edit.site.localhost:8081/"}}.Encode()}); err != nil {
		t.Fatal(err)
	}
	replies := f.sent(1)
	if len(replies) != 1 {
		t.Fatalf("%d replies; want 1", len(replies))
	}
	r := replies[0]
	if r.Header.Get("In-Reply-To") != "<t1@example.com>" || !strings.HasPrefix(r.Header.Get("Subject"), "Re: ") ||
		r.Header.Get("Auto-Submitted") != "auto-replied" {
		t.Fatalf("reply headers: %v", r.Header)
	}
	replyTo, _ := mail.ParseAddress(r.Header.Get("Reply-To"))
	tokenRcpt := replyTo.Address
	bob := f.mail("bob@bob.example", tokenRcpt, "b1@bob.example", "", "Make it red", "bob.example")
	env := envelope("bob@bob.example")
	env.Rcpt = []string{tokenRcpt}
	rep, _ := f.in.Inspect(ctx, env, bob)
	if rep.Decision.Action != "refuse" || rep.Thread.Thread != thread {
		t.Fatalf("foreign token: %+v %+v", rep.Decision, rep.Thread)
	}
	// Alice's own reply to the token continues her thread.
	alice := f.mail("alice@example.com", tokenRcpt, "t3@example.com", "", "Now italic", "example.com")
	env = envelope("alice@example.com")
	env.Rcpt = []string{tokenRcpt}
	if rep, _ := f.in.Inspect(ctx, env, alice); rep.Decision.Action != "run" || rep.Thread.By != "token" || rep.Thread.Thread != thread {
		t.Fatalf("own token: %+v %+v", rep.Decision, rep.Thread)
	}
}

// TestNullReversePathNeverRunsNorReplies: MAIL FROM:<> is automatic mail — even signed by a
// registered sender it queues no job, and a refusal it would have earned gets no reply.
func TestNullReversePathNeverRunsNorReplies(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, from := range []string{"alice@example.com", "carol@example.com"} {
		env := envelope("")
		env.NullSender = true
		raw := f.mail(from, "edit@edit.example.net", from+".null@x", "", "Make the header green", "example.com")
		rep, err := f.in.Process(context.Background(), env, raw)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Decision.Action != "ignore" || rep.Decision.Reply || !strings.Contains(rep.Loop, "MAIL FROM:<>") || rep.JobID != "" {
			t.Errorf("%s: decision %+v loop %q job %q", from, rep.Decision, rep.Loop, rep.JobID)
		}
	}
	// The same refusal with a real reverse-path is answered, so the check above means something.
	f.handle(f.mail("carol@example.com", "edit@edit.example.net", "c2@x", "", "Make the header green", "example.com"), "carol@example.com")
	if sent := f.sent(1); len(sent) != 1 || sent[0].Header.Get("In-Reply-To") != "<c2@x>" {
		t.Fatalf("%d replies; want only the one to the non-null refusal", len(sent))
	}
	if f.pending("alice") != 0 {
		t.Fatal("a null reverse-path message queued a job")
	}
}

// TestHostileMessageIsQuarantined: the deeply nested, unclosed message fails Handle quickly
// with intake.ErrQuarantine (not a temporary error), and Inspect reports it the same way.
func TestHostileMessageIsQuarantined(t *testing.T) {
	t.Parallel()
	f := setup(t)
	raw, err := os.ReadFile(filepath.Join("..", "message", "testdata", "hostile_nested.eml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.in.Handle(ctx, envelope("x@evil.example"), raw); !errors.Is(err, intake.ErrQuarantine) || !errors.Is(err, message.ErrBudget) {
		t.Fatalf("Handle = %v; want ErrQuarantine and ErrBudget", err)
	}
	rep, err := f.in.Inspect(ctx, envelope("x@evil.example"), raw)
	if !errors.Is(err, message.ErrBudget) || rep == nil || rep.Decision.Action != "quarantine" {
		t.Fatalf("Inspect = %+v, %v", rep, err)
	}
}

// TestRecordSentThreadsRepliesToReplacedMessageIDs: a mail service (SES) replaced our reply's
// Message-ID; after RecordSent, an owner's reply that names only the new id (no References,
// no token) still continues the thread.
func TestRecordSentThreadsRepliesToReplacedMessageIDs(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	first := f.handle(f.mail("alice@example.com", "edit@edit.example.net", "s1@example.com", "", "Make it green", "example.com"), "alice@example.com")
	ours := []byte("From: edit@edit.example.net\r\nTo: alice@example.com\r\nMessage-ID: <wo-done-1@edit.example.net>\r\n" +
		"In-Reply-To: <s1@example.com>\r\nReferences: <s1@example.com>\r\nSubject: Re: x\r\n\r\nDone.\r\n")
	if err := f.in.RecordSent(ctx, ours, "<0100018f-ses-id@email.amazonses.com>"); err != nil {
		t.Fatal(err)
	}
	next := f.handle(f.mail("alice@example.com", "edit@edit.example.net", "s2@example.com",
		"In-Reply-To: <0100018f-ses-id@email.amazonses.com>\r\n", "And bold", "example.com"), "alice@example.com")
	if next.Thread.Thread != first.Thread.Thread || next.Thread.By != "in-reply-to" {
		t.Fatalf("reply to the SES id resolved %+v; want thread %s by in-reply-to", next.Thread, first.Thread.Thread)
	}
	// A reply outside any thread is not recorded, and is no error.
	if err := f.in.RecordSent(ctx, []byte("Message-ID: <x@y>\r\n\r\n"), "<other@email.amazonses.com>"); err != nil {
		t.Fatal(err)
	}
}

func TestGuessedInstructionIsCarriedToTheReply(t *testing.T) {
	t.Parallel()
	f := setup(t)
	body := "-- \nMake the header green please.\n" // only text below a signature separator
	rep := f.handle(f.mail("Alice <alice@example.com>", "edit@edit.example.net", "g1@example.com", "", body, "example.com"), "alice@example.com")
	if rep.Decision.Action != "run" || !rep.Guessed || rep.Instruction != "Make the header green please." {
		t.Fatalf("decision %+v guessed %v instruction %q", rep.Decision, rep.Guessed, rep.Instruction)
	}
	rec, err := f.b.Jobs.Get(context.Background(), rep.JobID)
	if err != nil || !jobspec.Of(rec.Job).Guessed {
		t.Fatalf("job record %+v: %v", rec.Job, err)
	}
	if err := f.in.OnResult(context.Background(), broker.Result{JobID: rep.JobID, State: broker.StateDone, Summary: "Header is green."}); err != nil {
		t.Fatal(err)
	}
	msgs := f.sent(1)
	if len(msgs) != 1 {
		t.Fatalf("%d replies", len(msgs))
	}
	text := replyText(t, msgs[0])
	if !strings.Contains(text, "wasn't sure which part of your email was new") || !strings.Contains(text, "Make the header green please.") {
		t.Fatalf("reply does not say the instruction was guessed:\n%s", text)
	}
}

// replyText returns the text/plain part of a composed reply.
func replyText(t *testing.T, m *mail.Message) string {
	t.Helper()
	var buf bytes.Buffer
	for k, v := range m.Header {
		fmt.Fprintf(&buf, "%s: %s\r\n", k, strings.Join(v, ", "))
	}
	buf.WriteString("\r\n")
	if _, err := buf.ReadFrom(m.Body); err != nil {
		t.Fatal(err)
	}
	p, err := message.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return p.Text
}

// TestResendAfterRefusalIsHandled: a message refused (here: its sender was not registered yet)
// is not remembered as handled, so the same message sent again after the operator registered
// the sender runs; only a message that was accepted is a duplicate when it comes again.
func TestResendAfterRefusalIsHandled(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	raw := f.mail("Carol <carol@example.com>", "edit@edit.example.net", "c1@example.com", "", "Add our new opening hours", "example.com")
	if rep := f.handle(raw, "carol@example.com"); rep.Decision.Action != "refuse" {
		t.Fatalf("unregistered sender: %+v", rep.Decision)
	}
	projects, _ := project.Open(ctx, f.b)
	p, _ := projects.Get(ctx, "site")
	p.Senders["carol@example.com"] = "carol"
	if _, err := projects.Put(ctx, p); err != nil {
		t.Fatal(err)
	}
	rep := f.handle(raw, "carol@example.com")
	if rep.Decision.Action != "run" || f.pending("carol") != 1 {
		t.Fatalf("re-sent after the refusal: %+v, %d pending; want it run", rep.Decision, f.pending("carol"))
	}
	if again := f.handle(raw, "carol@example.com"); again.Decision.Action != "ignore" || f.pending("carol") != 1 {
		t.Fatalf("the accepted message again: %+v, %d pending; want a duplicate", again.Decision, f.pending("carol"))
	}
}

// TestHeldNoticeSurvivesRestart: messages over the limit are held (intake.ErrHold) and the
// pending notice is stored; a mail router started afresh (a restart before the notice went
// out) sends it, listing them.
func TestHeldNoticeSurvivesRestart(t *testing.T) {
	t.Parallel()
	notices, _ := natsjstest.Start(t, natsjstest.Options{NoSync: true}).Backend.Table(context.Background(), "heldnotices")
	f := setupWith(t, func(c *inbound.Config) { c.PerSender, c.HeldNoticeAfter, c.Notices = 1, time.Hour, notices })
	for i, body := range []string{"Change one", "Change two", "Change three"} {
		raw := f.mail("alice@example.com", "edit@edit.example.net", fmt.Sprintf("h%d@example.com", i), "", body, "example.com")
		err := f.in.Handle(context.Background(), envelope("alice@example.com"), raw)
		if held := errors.Is(err, intake.ErrHold); held != (i > 0) {
			t.Fatalf("message %d: %v; want held = %v", i, err, i > 0)
		}
	}
	if n := len(f.sent(0)); n != 0 {
		t.Fatalf("%d replies before the notice is due", n)
	}
	cfg := f.cfg
	cfg.HeldNoticeAfter = 50 * time.Millisecond
	restarted, err := inbound.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = restarted.Run(ctx) }()
	text := f.replyTo("h1@example.com")
	if !strings.Contains(text, "held 2 messages") || !strings.Contains(text, "Change two") || !strings.Contains(text, "Change three") {
		t.Fatalf("notice after the restart:\n%s", text)
	}
}

// TestHugeBodyIsReadFromItsHead: an outside sender's body of megabytes, shaped to make
// extraction slow, is read for the instruction from its first reply.MaxBody bytes, and the
// report says so; the mail is still handled (here: refused, the sender is not registered).
func TestHugeBodyIsReadFromItsHead(t *testing.T) {
	t.Parallel()
	f := setup(t)
	body := quoted + strings.Repeat("> wrote:\n", 4<<20/9)
	rep := f.handle(f.mail("Eve <eve@example.com>", "edit@edit.example.net", "huge@example.com", "", body, "example.com"), "eve@example.com")
	if rep.Instruction != "Make the header green please." {
		t.Errorf("instruction %.80q", rep.Instruction)
	}
	if !slices.ContainsFunc(rep.Problems, func(p string) bool { return strings.Contains(p, "the instruction was read from its first") }) {
		t.Errorf("problems %q: want one saying the body was cut", rep.Problems)
	}
}

// TestAForwardedMessageTravelsWithItsInstruction: the owner forwards the town hall's mail with
// "Please put this event on the news page."; the job's instruction is the note, and the
// forwarded message (the event's date and place) goes with it for the agent.
func TestAForwardedMessageTravelsWithItsInstruction(t *testing.T) {
	t.Parallel()
	f := setup(t)
	body := "Please put this event on the news page.\n\n" +
		"---------- Forwarded message ---------\nFrom: Town Hall <events@town.example>\nSubject: Spring fair\n\n" +
		"The spring fair is on 21 March, 10:00 to 16:00, in the market square.\n"
	rep := f.handle(f.mail("Alice <alice@example.com>", "edit@edit.example.net", "fw1@example.com", "", body, "example.com"), "alice@example.com")
	if rep.Decision.Action != "run" || rep.Instruction != "Please put this event on the news page." {
		t.Fatalf("decision %+v instruction %q", rep.Decision, rep.Instruction)
	}
	rec, err := f.b.Jobs.Get(context.Background(), rep.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if fw := jobspec.Of(rec.Job).Forward; !strings.Contains(fw, "21 March, 10:00 to 16:00, in the market square") {
		t.Fatalf("the job's forward %q, want the forwarded message", fw)
	}
}
