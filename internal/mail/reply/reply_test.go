package reply_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/webordinary/webordinary/internal/mail/reply"
)

func TestExtractFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		body      string
		want      reply.Result
		quotedHas string // a substring Quoted must contain (Quoted is for debugging, not compared whole)
	}{
		{
			name:      "top post keeps the closing",
			body:      "Make it green.\n\nThanks,\nAna\n\nOn Mon, Jan 6, 2025 at 10:02 AM Web <a@b.c> wrote:\n> old\n",
			want:      reply.Result{Text: "Make it green.\n\nThanks,\nAna"},
			quotedHas: "> old",
		},
		{
			name: "signature and footer go to Signature",
			body: "Make it green.\n\n-- \nAna Lopez\nAna's Bakery\n\nSent from my iPhone\n",
			want: reply.Result{Text: "Make it green.", Signature: "--\nAna Lopez\nAna's Bakery\n\nSent from my iPhone"},
		},
		{
			name: "footer without signature",
			body: "Make it green.\nSent from my iPhone",
			want: reply.Result{Text: "Make it green.", Signature: "Sent from my iPhone"},
		},
		{
			name:      "forward with note",
			body:      "Do this please.\n\n---------- Forwarded message ---------\nFrom: Lee <l@x.y>\nSubject: hours\n\nNew hours.\n",
			want:      reply.Result{Text: "Do this please.", Forwarded: true},
			quotedHas: "New hours.",
		},
		{
			name:      "forward without note returns the forwarded text",
			body:      "---------- Forwarded message ---------\nFrom: Lee <l@x.y>\nSubject: hours\n\nNew hours.\n\n-- \nLee\n",
			want:      reply.Result{Text: "New hours.", Forwarded: true, Signature: "--\nLee"},
			quotedHas: "From: Lee <l@x.y>",
		},
		{
			name:      "forward of a forward without notes",
			body:      "Begin forwarded message:\n\n> From: A <a@x.y>\n> Subject: x\n>\n> ---------- Forwarded message ---------\n> From: B <b@x.y>\n> Subject: x\n>\n> Make the logo bigger.\n",
			want:      reply.Result{Text: "Make the logo bigger.", Forwarded: true},
			quotedHas: "From: B <b@x.y>",
		},
		{
			name: "no history at all",
			body: "  Make the header green.  \n\n",
			want: reply.Result{Text: "Make the header green."},
		},
		{
			name: "empty body",
			body: "",
			want: reply.Result{},
		},
		{
			// discourse's trimmer convention, adopted with it: a body that is only a quote is kept.
			name:      "only a quote",
			body:      "> Should we publish?\n",
			want:      reply.Result{Text: "> Should we publish?"},
			quotedHas: "> Should we publish?",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := reply.Extract(tt.body)
			if got.Text != tt.want.Text || got.Forwarded != tt.want.Forwarded || got.Signature != tt.want.Signature {
				t.Errorf("Extract = %+v\nwant Text %q Forwarded %v Signature %q", got, tt.want.Text, tt.want.Forwarded, tt.want.Signature)
			}
			if !strings.Contains(got.Quoted, tt.quotedHas) {
				t.Errorf("Quoted = %q, want it to contain %q", got.Quoted, tt.quotedHas)
			}
		})
	}
}

// FuzzExtract checks that no body panics and that the text is trimmed and stays valid UTF-8.
func FuzzExtract(f *testing.F) {
	f.Add("Make it green.\n\nOn Mon, Jan 6, 2025 at 10:02 AM Web <a@b.c>\nwrote:\n> old\n")
	f.Add("---------- Forwarded message ---------\nFrom: a\n\n> x\n-- \ny")
	f.Add("From: a\nSent: 1/1/2025\nTo: b\n\nBegin forwarded message:\n> From: c\n")
	f.Fuzz(func(t *testing.T, body string) {
		got := reply.Extract(body)
		if got.Text != strings.TrimSpace(got.Text) {
			t.Fatalf("Text not trimmed: %q", got.Text)
		}
		if utf8.ValidString(body) && !utf8.ValidString(got.Text) {
			t.Fatalf("Text is not valid UTF-8: %q", got.Text)
		}
	})
}

// TestAForwardWithANoteKeepsTheForwardForTheAgent: "put this event on the news page" above a
// forwarded message is the instruction, and the forwarded message is what it is about: the
// text is the note, and Forward carries the forwarded message (headers and body) for the agent.
func TestAForwardWithANoteKeepsTheForwardForTheAgent(t *testing.T) {
	body := "Please put this event on the news page.\n\n" +
		"---------- Forwarded message ---------\n" +
		"From: Town Hall <events@town.example>\n" +
		"Date: Mon, 2 Mar 2026 at 09:00\n" +
		"Subject: Spring fair\n" +
		"To: cafe@example.org\n\n" +
		"The spring fair is on 21 March, 10:00 to 16:00, in the market square.\n"
	r := reply.Extract(body)
	if r.Text != "Please put this event on the news page." {
		t.Errorf("text %q, want the note", r.Text)
	}
	if !strings.Contains(r.Forward, "21 March, 10:00 to 16:00") || !strings.Contains(r.Forward, "Subject: Spring fair") {
		t.Errorf("forward %q, want the forwarded message with its headers", r.Forward)
	}
	plain := reply.Extract("Make the header green.\n\nOn Mon, 2 Mar 2026, Ann <ann@example.org> wrote:\n> Hello\n")
	if plain.Forward != "" {
		t.Errorf("a reply with quoted history has a forward: %q", plain.Forward)
	}
}
