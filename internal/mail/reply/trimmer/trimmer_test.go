package trimmer_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dimiro1 "github.com/dimiro1/reply"

	"github.com/webordinary/webordinary/internal/mail/reply/trimmer"
)

// bodies returns every email body under package reply's testdata: the public corpora and the
// self-written cases (whole txtar files, which are bodies too).
func bodies(t testing.TB) map[string]string {
	t.Helper()
	out := make(map[string]string)
	err := filepath.WalkDir(filepath.Join("..", "testdata"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(path, string(filepath.Separator)+"want"+string(filepath.Separator)) {
			return err
		}
		b, err := os.ReadFile(path)
		out[path] = string(b)
		return err
	})
	if err != nil || len(out) == 0 {
		t.Fatalf("no bodies: %v", err)
	}
	return out
}

// TestSameAsDimiro1 checks the copy behaves as the original on every corpus body, also with
// CRLF line endings and with the body cut at its middle line.
func TestSameAsDimiro1(t *testing.T) {
	t.Parallel()
	for name, body := range bodies(t) {
		lines := strings.Split(body, "\n")
		for _, b := range []string{body, strings.ReplaceAll(body, "\n", "\r\n"), strings.Join(lines[:len(lines)/2], "\n")} {
			if got, want := trimmer.FromText(b), dimiro1.FromText(b); got != want {
				t.Errorf("%s: copy and original differ\n got: %q\nwant: %q", name, got, want)
			}
		}
	}
}

// FuzzSameAsDimiro1 compares the copy with the original on generated bodies.
func FuzzSameAsDimiro1(f *testing.F) {
	for _, body := range bodies(f) {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if got, want := trimmer.FromText(body), dimiro1.FromText(body); got != want {
			t.Errorf("copy and original differ on %q\n got: %q\nwant: %q", body, got, want)
		}
	})
}

// BenchmarkFromText measures the copy on a typical top-posted reply with a quoted history.
func BenchmarkFromText(b *testing.B) {
	body := typical()
	b.ReportAllocs()
	for b.Loop() {
		trimmer.FromText(body)
	}
}

// BenchmarkDimiro1 measures the original on the same body.
func BenchmarkDimiro1(b *testing.B) {
	body := typical()
	b.ReportAllocs()
	for b.Loop() {
		dimiro1.FromText(body)
	}
}

func typical() string {
	body := "Hi,\n\nPlease make the header green and change the tagline to \"Fresh bread daily\".\n\nThanks,\nAna\n\n" +
		"On Mon, Jan 6, 2025 at 10:02 AM Webordinary <site@webordinary.com> wrote:\n\n"
	for range 30 {
		body += "> Your site is live. The preview is at https://preview.example.com/ana and the files changed are listed below.\n"
	}
	return body
}
