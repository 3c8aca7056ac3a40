package message_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/mail/message"
)

// nested is the hostile message: multipart parts nested depth levels deep, no boundary ever
// closed. Before the parser was bounded, each level doubled the parse time (30 levels, under
// 2 KB: minutes).
func nested(depth int) []byte {
	var b strings.Builder
	b.WriteString("From: x@evil.example\r\nTo: edit@edit.example.net\r\nSubject: hi\r\nMIME-Version: 1.0\r\n")
	for i := range depth {
		fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=b%d\r\n\r\n--b%d\r\n", i, i)
	}
	b.WriteString("Content-Type: text/plain\r\n\r\nhello\r\n")
	return []byte(b.String())
}

// TestHostileNestedFileIsTheGenerator keeps testdata/hostile_nested.eml (a fuzz seed, used by
// other packages' tests too) equal to nested(30).
func TestHostileNestedFileIsTheGenerator(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("testdata", "hostile_nested.eml"))
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != string(nested(30)) || len(raw) >= 2048 {
		t.Fatalf("testdata/hostile_nested.eml (%d bytes) differs from nested(30)", len(raw))
	}
}

func TestParseBudget(t *testing.T) {
	t.Parallel()
	big := "Subject: big\r\n\r\n" + strings.Repeat("x", 2000) + "\r\n"
	tests := []struct {
		name string
		raw  []byte
		lim  message.Limits
		want error
	}{
		{"hostile nesting, default depth", nested(30), message.Limits{}, message.ErrBudget},
		{"nesting at the default depth", nested(message.DefaultMaxDepth), message.Limits{}, nil},
		{"hostile nesting, depth raised", nested(30), message.Limits{MaxDepth: 40}, nil},
		{"nesting past a lowered depth", nested(3), message.Limits{MaxDepth: 2}, message.ErrBudget},
		{"size", []byte(big), message.Limits{MaxBytes: 1000}, message.ErrBudget},
		{"size within", []byte(big), message.Limits{MaxBytes: 4000}, nil},
		{"time", []byte(big), message.Limits{Timeout: time.Nanosecond}, message.ErrBudget},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			msg, err := parseLimitsWithin(t, tt.raw, tt.lim, 10*time.Second)
			if !errors.Is(err, tt.want) || (err == nil) != (msg != nil) {
				t.Fatalf("Parse = %v, %v; want error %v", msg != nil, err, tt.want)
			}
		})
	}
}

// TestParseNestedKeepsTheText: closing the boundaries the sender left open keeps what enmime
// would have read, and says that it was unclosed.
func TestParseNestedKeepsTheText(t *testing.T) {
	t.Parallel()
	msg, err := message.ParseContext(context.Background(), nested(30), message.Limits{MaxDepth: 30})
	if err != nil {
		t.Fatal(err)
	}
	if msg.Text != "hello" || msg.Subject != "hi" {
		t.Fatalf("Text %q Subject %q", msg.Text, msg.Subject)
	}
	if !strings.Contains(strings.Join(msg.Problems, "\n"), `Boundary "b29" was not closed`) {
		t.Fatalf("Problems = %q", msg.Problems)
	}
}

// TestParseSiblingUnclosedSubtrees: unclosed nested parts ended by their parent's next
// delimiter (not by the end of the message) are closed there, and every sibling is kept.
func TestParseSiblingUnclosedSubtrees(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("Subject: s\r\nContent-Type: multipart/mixed; boundary=top\r\n\r\n")
	for i := range 50 {
		b.WriteString("--top\r\n")
		for j := range 18 {
			fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=n%d\r\n\r\n--n%d\r\n", j, j)
		}
		fmt.Fprintf(&b, "Content-Type: text/plain\r\n\r\npart%d\r\n", i)
	}
	b.WriteString("--top--\r\n")
	msg, err := parseLimitsWithin(t, []byte(b.String()), message.Limits{}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(msg.Text, "part"); n != 50 {
		t.Fatalf("Text has %d of 50 parts: %q", n, msg.Text)
	}
}

// TestParseContextCanceled: a caller that stops waiting gets ctx.Err(), not ErrBudget, so it
// can tell shutdown from a hostile message.
func TestParseContextCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := message.ParseContext(ctx, nested(3), message.Limits{})
	if !errors.Is(err, context.Canceled) || errors.Is(err, message.ErrBudget) {
		t.Fatalf("err = %v; want context.Canceled", err)
	}
}

// parseLimitsWithin runs ParseContext and fails the test if it does not return within d.
func parseLimitsWithin(t *testing.T, raw []byte, lim message.Limits, d time.Duration) (*message.Message, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	msg, err := message.ParseContext(ctx, raw, lim)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Parse did not return within %v on %d bytes", d, len(raw))
	}
	return msg, err
}

// BenchmarkHostileNested parses the hostile message (30 unclosed levels): rejected at the
// default depth, and parsed in full with the depth raised (the boundaries closed for enmime).
// Before the fix the second took minutes (2^depth reads at the end of the input).
func BenchmarkHostileNested(b *testing.B) {
	raw := nested(30)
	for _, bc := range []struct {
		name string
		lim  message.Limits
	}{{"default", message.Limits{}}, {"depth40", message.Limits{MaxDepth: 40}}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				_, _ = message.ParseContext(context.Background(), raw, bc.lim)
			}
		})
	}
}

// TestParseHostileMismatchedHeader: a fuzzed hostile message whose broken header enmime reads
// as multipart but shape does not (so its boundaries stay unclosed) is still refused promptly:
// the reads past the end are bounded.
func TestParseHostileMismatchedHeader(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("testdata", "hostile_mismatched_header.eml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseLimitsWithin(t, raw, message.Limits{MaxDepth: 40}, 10*time.Second); !errors.Is(err, message.ErrBudget) {
		t.Fatalf("Parse = %v; want ErrBudget", err)
	}
}

// A sender's multipart message of many short lines and no text part (an attachment alone)
// costs about its size to parse, not a slice entry per line: the text outside the parts is
// read line by line up to the first part. Not parallel: it counts the process's allocations.
func TestParseManyLinesAllocatesAboutTheMessage(t *testing.T) {
	const lines = 2 << 20
	head := "From: x@evil.example\r\nTo: edit@edit.example.net\r\nSubject: hi\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=\"B\"\r\n\r\n"
	part := "--B\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=a.bin\r\n\r\nxx\r\n--B--\r\n"
	for name, raw := range map[string]string{
		"before the parts": head + strings.Repeat("\n", lines) + part,
		"after the parts":  head + part + strings.Repeat("\n", lines),
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if _, err := message.Parse([]byte(raw)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		runtime.ReadMemStats(&after)
		if got, most := after.TotalAlloc-before.TotalAlloc, uint64(10*len(raw)); got > most {
			t.Errorf("%s: parsing %d bytes allocated %d MB; want at most %d MB", name, len(raw), got>>20, most>>20)
		}
	}
}
