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

// TestExtractHostile runs extraction over the first half megabyte of every hostile body. Work
// that grew with the square of the body would not end within the test's time limit; no timing
// is asserted. The person's text must survive each.
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
const hostileTestSize = 512 << 10
