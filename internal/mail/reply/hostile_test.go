package reply_test

import (
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/mail/reply"
)

// hostileBodies are bodies of 0.5 to 1 MB shaped to make a line-by-line extractor do work per
// pair of lines: many markers below text, long would-be attributions, deep quotes.
func hostileBodies() map[string]string {
	return map[string]string{
		"text above markers": strings.Repeat("Make it green.\nOn Mon, 1 Jan 2024 at 10:00 Ann <a@b.c> wrote:\n", 12000),
		"markers and quotes": strings.Repeat("2024-01-01 10:00 GMT Ann <a@b.c>\n> quoted\nanswer\n", 16000),
		"long lines":         strings.Repeat("On "+strings.Repeat("x ", 3000)+" wrote:\n", 160),
		"header runs":        strings.Repeat("Text\nFrom: a\nSent: b\nTo: c\n", 20000),
		// lines that each make the wrapped-attribution search look at the lines below it
		"wrapped attribution tails": strings.Repeat("Thanks\nName\nschrieb am 4. März 2025 um 10:12:\n", 12000),
		"colonless attributions":    strings.Repeat("Am 04.03.25 um 10:12 schrieb Ann\nVon: Ann <a@b.c>\n", 20000),
		"banner-like lines":         strings.Repeat("CAUTION: external "+strings.Repeat("sender ", 80)+"\n", 1800),
		"date-led lines":            strings.Repeat("02.04.2012 14:20 Ann <\na@b.c> написал:\nok\n", 12000),
	}
}

// TestExtractHostile runs extraction over the first MaxBody bytes of every hostile body (all
// that Extract reads). Work that grew with the square of the body would not end within the
// test's time limit; no timing is asserted. The person's text must survive each.
func TestExtractHostile(t *testing.T) {
	t.Parallel()
	for name, body := range hostileBodies() {
		body = body[:strings.LastIndexByte(body[:hostileTestSize], '\n')+1]
		if n := len(body); n < hostileTestSize*9/10 {
			t.Fatalf("%s: body of %d bytes, want about %d", name, n, hostileTestSize)
		}
		got := reply.Extract(body)
		if got.Text == "" || len(got.Text) > len(body) {
			t.Errorf("%s: %d bytes of text from a %d-byte body", name, len(got.Text), len(body))
		}
	}
}

// hostileTestSize is how much of each hostile body the test runs over, in bytes.
const hostileTestSize = reply.MaxBody

// A sender's body of megabytes costs extraction what its first MaxBody bytes cost: the work per
// byte of the hostile shapes is steep (a 25 MB body of "wrote:" lines took minutes), and no
// person writes an instruction that long. The text above survives; nothing past the cut is
// looked at.
func TestExtractReadsOnlyTheFirstMaxBody(t *testing.T) {
	t.Parallel()
	body := "Make it green.\n\nOn Mon, 2 Nov 2026 at 10:00, Ann <a@b.c> wrote:\n" + strings.Repeat("> wrote:\n", 4<<20/9)
	got := reply.Extract(body)
	if !got.Cut {
		t.Error("a body of 4 MiB was not reported cut")
	}
	if got.Text != "Make it green." {
		t.Errorf("the text above was lost: %.80q", got.Text)
	}
	if seen := len(got.Text) + len(got.Quoted) + len(got.Signature); seen > reply.MaxBody {
		t.Errorf("extraction went through %d bytes of a %d-byte body; want at most MaxBody (%d)", seen, len(body), reply.MaxBody)
	}
	if short := reply.Extract("Make it green.\n"); short.Cut {
		t.Error("a short body was reported cut")
	}
}
