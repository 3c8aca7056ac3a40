package reply_test

import (
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/mail/reply"
)

// hostileBodies are bodies of about 1 MB shaped to make a line-by-line extractor do work per
// pair of lines: many markers below text, long would-be attributions, deep quotes.
func hostileBodies() map[string]string {
	return map[string]string{
		"text above markers": strings.Repeat("Make it green.\nOn Mon, 1 Jan 2024 at 10:00 Ann <a@b.c> wrote:\n", 12000),
		"markers and quotes": strings.Repeat("2024-01-01 10:00 GMT Ann <a@b.c>\n> quoted\nanswer\n", 16000),
		"long lines":         strings.Repeat("On "+strings.Repeat("x ", 3000)+" wrote:\n", 160),
		"header runs":        strings.Repeat("Text\nFrom: a\nSent: b\nTo: c\n", 20000),
	}
}

// BenchmarkExtractHostile measures extraction on hostile bodies; each must stay linear in the
// body's size (go test -bench ExtractHostile ./internal/mail/reply).
func BenchmarkExtractHostile(b *testing.B) {
	for name, body := range hostileBodies() {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				reply.Extract(body)
			}
		})
	}
}
