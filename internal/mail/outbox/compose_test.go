package outbox

import (
	"bytes"
	"fmt"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/failure"
)

func TestComposeKinds(t *testing.T) {
	t.Parallel()
	base := sampleReply()
	tests := []struct {
		kind   Kind
		modify func(*Reply)
		want   []string // in both the text and the HTML part
	}{
		{Done, nil, []string{
			"Your change is ready to look at.", "Changed the greeting to Grüße — ✓", "See the preview",
			"https://t0k3n.preview.example.com/", "Reply and say what to change",
		}},
		{Failed, func(r *Reply) {
			r.Error, r.Problem = "build: exit 1", failure.Build
		}, []string{"couldn't finish", "your site no longer built with it", "What to do: Reply with more detail"}},
		{Interrupted, func(r *Reply) { r.Superseded = true }, []string{"Your newer message on this thread took over",
			"What I had done so far was saved"}},
		{Dead, func(r *Reply) { r.Attempts, r.Error, r.Problem = 3, "agent crashed", failure.Agent }, []string{
			"made 3 attempts", "stopped with an error", "have been told",
		}},
		{Refused, func(r *Reply) {
			r.Error, r.Hint = "this address is not verified for example.com", "Verify it from the dashboard."
		}, []string{"didn't act on your message", "Why: this address is not verified", "What to do: Verify it"}},
		{Held, func(r *Reply) {
			r.HeldMessages, r.HeldUntil = []string{"Burst 021 — Change number 21", "Burst 022 — Change number 22"}, time.Date(2026, 11, 2, 16, 40, 0, 0, time.UTC)
		}, []string{
			"Many instructions arrived", "held 2 messages", "Burst 021 — Change number 21", "Burst 022", "Nothing is lost",
			"before 16:40 UTC will be held too",
		}},
		{Received, nil, []string{"Got it!", "reply here when it's done"}},
		{Waiting, func(r *Reply) { r.ModelBusy = true }, []string{"Still on it: the AI service I use is busy",
			"reply here when it's done", "don't need to send anything again"}},
		{Published, func(r *Reply) {
			r.Summary, r.LiveURL = "Your changes from this conversation are live at https://acme.example.com/.", "https://acme.example.com/"
		}, []string{"are live at https://acme.example.com/", "See the live site", "to take the last publish back"}},
	}
	if len(tests) != len(Kinds) {
		t.Fatalf("table covers %d kinds, want all %d", len(tests), len(Kinds))
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			t.Parallel()
			r := base
			r.Kind = tt.kind
			if tt.modify != nil {
				tt.modify(&r)
			}
			msg, err := Compose(r, newClock().Now())
			if err != nil {
				t.Fatal(err)
			}
			p := parse(t, msg)
			for _, w := range tt.want {
				if !strings.Contains(p.Text, w) {
					t.Errorf("text part lacks %q:\n%s", w, p.Text)
				}
				if !strings.Contains(p.HTML, htmlEscape(w)) {
					t.Errorf("html part lacks %q:\n%s", htmlEscape(w), p.HTML)
				}
			}
			if want := "<wo-job-42-" + string(tt.kind) + "@example.com>"; p.Header.Get("Message-ID") != want {
				t.Errorf("Message-ID = %q, want %q", p.Header.Get("Message-ID"), want)
			}
		})
	}
}

// TestInterruptedSaysExactlyWhatHappened: who stopped the job, and "saved" only with a commit
// (an interrupted job that changed nothing shows no commit and claims no saved work).
func TestInterruptedSaysExactlyWhatHappened(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name               string
		superseded, commit bool
		want, not          []string
	}{
		{"newer, saved", true, true, []string{"newer message on this thread took over", "your newer message picks up from there"},
			[]string{"hadn't changed anything", "stopped before it finished"}},
		{"newer, nothing", true, false, []string{"newer message on this thread took over", "hadn't changed anything yet, so nothing was saved"},
			[]string{"was saved,", "commit", "Files changed"}},
		{"operator, saved", false, true, []string{"stopped before it finished", "What I had done so far was saved."},
			[]string{"newer message", "hadn't changed"}},
		{"operator, nothing", false, false, []string{"stopped before it finished", "nothing was saved"},
			[]string{"newer message", "commit", "done so far was saved"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := sampleReply()
			r.Kind, r.Superseded = Interrupted, tt.superseded
			if !tt.commit {
				r.Commit = ""
			}
			msg, err := Compose(r, newClock().Now())
			if err != nil {
				t.Fatal(err)
			}
			text := parse(t, msg).Text
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("lacks %q:\n%s", w, text)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(text, n) {
					t.Errorf("says %q:\n%s", n, text)
				}
			}
		})
	}
}

// htmlEscape is what html/template makes of the test strings.
func htmlEscape(s string) string {
	return strings.NewReplacer("'", "&#39;", "+", "&#43;", "<", "&lt;", ">", "&gt;", "&", "&amp;").Replace(s)
}

func TestComposeHeaders(t *testing.T) {
	t.Parallel()
	msg, err := Compose(sampleReply(), newClock().Now())
	if err != nil {
		t.Fatal(err)
	}
	p := parse(t, msg)
	want := map[string]string{
		"Message-ID":               "<wo-job-42-done@example.com>",
		"In-Reply-To":              "<orig-1@mail.example.org>",
		"References":               "<root@mail.example.org> <orig-1@mail.example.org>",
		"Reply-To":                 `"webordinary" <edit+t0k3n@example.com>`,
		"Auto-Submitted":           "auto-replied",
		"X-Auto-Response-Suppress": "All",
		"X-Webordinary-Job":        "job-42",
		"MIME-Version":             "1.0",
		"Date":                     "Sun, 01 Mar 2026 12:00:00 +0000",
	}
	for name, w := range want {
		if got := p.Header.Get(name); got != w {
			t.Errorf("%s = %q, want %q", name, got, w)
		}
	}
	if got := p.subject(t); got != "Re: Grüße — ✓" {
		t.Errorf("Subject = %q", got)
	}
	to, err := p.Header.AddressList("To")
	if err != nil || len(to) != 1 || to[0].Name != "Jürgen Müller" || to[0].Address != "owner@example.org" {
		t.Errorf("To = %v, %v", to, err)
	}
	for i, line := range strings.Split(string(msg), "\r\n") {
		if len(line) > 998 {
			t.Errorf("line %d is %d bytes long", i, len(line))
		}
	}
}

func TestComposeEscapesHTML(t *testing.T) {
	t.Parallel()
	r := sampleReply()
	r.Kind = Failed
	r.Error = `<img src=x onerror="alert(1)">`
	r.Understood = "</pre><script>alert(2)</script>"
	r.PreviewURLs = []string{"javascript:alert(3)"}
	msg, err := Compose(r, newClock().Now())
	if err != nil {
		t.Fatal(err)
	}
	html := parse(t, msg).HTML
	for _, bad := range []string{"<script>", "<img", `href="javascript:`} {
		if strings.Contains(html, bad) {
			t.Errorf("html contains %q:\n%s", bad, html)
		}
	}
	if !strings.Contains(html, "&lt;/pre&gt;&lt;script&gt;alert(2)&lt;/script&gt;</pre>") {
		t.Errorf("quoted instruction not escaped inside <pre>:\n%s", html)
	}
	r.Kind = Done
	msg, _ = Compose(r, newClock().Now())
	if html := parse(t, msg).HTML; !strings.Contains(html, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("summary not escaped:\n%s", html)
	}
}

func TestReplySubject(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"Hello", "Re: Hello"},
		{"Re: Hello", "Re: Hello"},
		{"RE: Re: re:Hello", "Re: Hello"},
		{"Aw: Hello", "Re: Hello"},
		{"AW:Sv: Hello", "Re: Hello"},
		{"Re[2]: Hello", "Re: Hello"},
		{"Fwd: Hello", "Re: Fwd: Hello"},
		{"Regarding the header", "Re: Regarding the header"},
		{"  ", "Re: (no subject)"},
		{"Grüße — ✓", "Re: Grüße — ✓"},
		{"two\r\nBcc: evil@example.com", "Re: two Bcc: evil@example.com"},
	}
	for _, tt := range tests {
		if got := replySubject(tt.in); got != tt.want {
			t.Errorf("replySubject(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestReferences(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		refs      []string
		inReplyTo string
		want      []string
	}{
		{"appends in-reply-to", []string{"<a@x>"}, "b@x", []string{"a@x", "b@x"}},
		{"already present", []string{"a@x", " <b@x> "}, "<b@x>", []string{"a@x", "b@x"}},
		{"no thread", nil, "", nil},
		{"long thread keeps first and latest", manyIDs(30), "last@x", append([]string{"0@x"}, append(manyIDs(30)[12:], "last@x")...)},
	}
	for _, tt := range tests {
		got := references(tt.refs, tt.inReplyTo)
		if strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("%s: references = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func manyIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%d@x", i)
	}
	return ids
}

func TestComposeMessageID(t *testing.T) {
	t.Parallel()
	r := sampleReply()
	r.Kind, r.JobID = Refused, ""
	a, err := Compose(r, newClock().Now())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Compose(r, newClock().Now())
	if !bytes.Equal(a, b) {
		t.Error("composing the same reply twice gave different bytes")
	}
	id := parse(t, a).Header.Get("Message-ID")
	if !strings.HasPrefix(id, "<wo-m") || !strings.HasSuffix(id, "-refused@example.com>") {
		t.Errorf("derived Message-ID = %q", id)
	}
	r.MessageID = "<given@example.com>"
	c, _ := Compose(r, newClock().Now())
	if got := parse(t, c).Header.Get("Message-ID"); got != "<given@example.com>" {
		t.Errorf("given Message-ID = %q", got)
	}
}

func TestComposeRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		modify func(*Reply)
		want   string
	}{
		{"unknown kind", func(r *Reply) { r.Kind = "maybe" }, "unknown reply kind"},
		{"no recipient", func(r *Reply) { r.To = mail.Address{} }, "no To address"},
		{"no sender", func(r *Reply) { r.From = mail.Address{} }, "no From address"},
		{"no id source", func(r *Reply) { r.JobID, r.InReplyTo = "", "" }, "stable Message-ID"},
		{"bad reply-to", func(r *Reply) { r.ReplyTo = "not an address" }, "reply-to"},
	}
	for _, tt := range tests {
		r := sampleReply()
		tt.modify(&r)
		_, err := Compose(r, time.Now())
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tt.name, err, tt.want)
		}
	}
}

func TestComposeNoHeaderInjection(t *testing.T) {
	t.Parallel()
	r := sampleReply()
	r.Subject = "hi\r\nBcc: evil@example.com"
	r.JobID = "job\r\nBcc: evil@example.com"
	msg, err := Compose(r, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if h := parse(t, msg).Header; h.Get("Bcc") != "" {
		t.Errorf("injected Bcc header: %q", h.Get("Bcc"))
	}
}

// TestComposeQuotesTheInstructionBack checks that replies about a job say how the instruction
// was read, and say so when it was a guess; refusals do not.
func TestComposeQuotesTheInstructionBack(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind    Kind
		guessed bool
		want    string // "" means the quote-back is absent
	}{
		{Done, false, "I read your request as:"},
		{Received, true, "I wasn't sure which part of your email was new, so I read your request as:"},
		{Failed, false, "I read your request as:"},
		{Refused, false, ""},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			t.Parallel()
			r := sampleReply()
			r.Kind, r.Understood, r.Guessed = tt.kind, "Make the header green.", tt.guessed
			msg, err := Compose(r, newClock().Now())
			if err != nil {
				t.Fatal(err)
			}
			p := parse(t, msg)
			has := strings.Contains(p.Text, "read your request as:") && strings.Contains(p.Text, "Make the header green.")
			if tt.want == "" && has || tt.want != "" && (!has || !strings.Contains(p.Text, tt.want)) {
				t.Errorf("text part, want quote-back %q:\n%s", tt.want, p.Text)
			}
			if strings.Contains(p.Text, "::") {
				t.Errorf("text part has a doubled colon:\n%s", p.Text)
			}
		})
	}
}

// TestLeftOutIsListedWhateverTheSummary: what the platform would not save is listed on its own,
// so a long summary, cut for the owner, cannot drop it.
func TestLeftOutIsListedWhateverTheSummary(t *testing.T) {
	t.Parallel()
	r := sampleReply()
	r.Summary = strings.Repeat("I changed a great many things on the site. ", 40) + "\n\nLeft out of the commit: sub/ (a git repository inside your site)."
	r.LeftOut = []string{"sub/ (a git repository inside your site)"}
	msg, err := Compose(r, newClock().Now())
	if err != nil {
		t.Fatal(err)
	}
	p := parse(t, msg)
	for _, part := range []string{p.Text, p.HTML} {
		if strings.Count(part, "sub/ (a git repository inside your site)") != 1 || !strings.Contains(part, "I left these out of what I saved") {
			t.Errorf("the reply does not list what was left out once:\n%s", part)
		}
	}
}
