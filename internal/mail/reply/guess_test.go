package reply_test

import (
	"testing"

	"github.com/webordinary/webordinary/internal/mail/reply"
)

// TestNeverLoseAnInstruction checks that a body whose only unquoted text sits where history
// would be still yields that text, marked as guessed.
func TestNeverLoseAnInstruction(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, want string
		guessed          bool
	}{
		{"text below an unquoted attribution",
			"On Mon, Jan 6, 2025 at 10:02 AM Web <site@webordinary.com> wrote:\n\nPlease make the header green.\n",
			"Please make the header green.", false},
		{"text only below a signature separator",
			"-- \nPlease publish the new menu.\n",
			"Please publish the new menu.", true},
		{"Android Gmail: last line directly above the attribution",
			"Please make the header green.\nOn Mon, Jan 6, 2025 at 10:02 AM Web <site@webordinary.com> wrote:\n> Your site is live.\n",
			"Please make the header green.", false},
		{"only a quote keeps the quote", "> Should we publish?\n", "> Should we publish?", false},
		{"nothing at all", "\n\n", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := reply.Extract(tt.body)
			if got.Text != tt.want || got.Guessed != tt.guessed {
				t.Errorf("Extract = %q guessed %v, want %q guessed %v", got.Text, got.Guessed, tt.want, tt.guessed)
			}
		})
	}
}

// BenchmarkExtract measures a typical top-posted Gmail reply with a quoted history.
func BenchmarkExtract(b *testing.B) {
	body := "Hi,\n\nPlease make the header green and change the tagline to \"Fresh bread daily\".\n\nThanks,\nAna\n\n" +
		"On Mon, Jan 6, 2025 at 10:02 AM Webordinary <site@webordinary.com> wrote:\n\n"
	for range 30 {
		body += "> Your site is live. The preview is at https://preview.example.com/ana and the files changed are listed below.\n"
	}
	b.ReportAllocs()
	for b.Loop() {
		reply.Extract(body)
	}
}
