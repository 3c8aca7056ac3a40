package message_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/webordinary/webordinary/internal/mail/message"
)

// FuzzParse checks that no input panics, that Text and Subject are valid UTF-8, and that every
// failure wraps ErrMalformed or ErrBudget. testdata/hostile_nested.eml is among the seeds.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.eml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		msg, err := parseWithin(t, raw, fuzzDeadline)
		if err != nil {
			if !(errors.Is(err, message.ErrMalformed) || errors.Is(err, message.ErrBudget)) || msg != nil {
				t.Fatalf("Parse = %v, %v; want nil and ErrMalformed or ErrBudget", msg, err)
			}
			return
		}
		if !utf8.ValidString(msg.Text) || !utf8.ValidString(msg.Subject) || !utf8.ValidString(msg.HTML) {
			t.Fatalf("invalid UTF-8: Text %q Subject %q", msg.Text, msg.Subject)
		}
		for _, a := range msg.Attachments {
			if a.Name == "" {
				t.Fatalf("empty attachment name in %+v", a)
			}
		}
	})
}

// fuzzDeadline is how long one input may take; a slower one is reported as a failure, so that
// the fuzzer records it instead of stalling.
const fuzzDeadline = 2 * time.Second

// parseWithin runs Parse and fails the test if it does not return within d.
func parseWithin(t *testing.T, raw []byte, d time.Duration) (*message.Message, error) {
	t.Helper()
	type result struct {
		msg *message.Message
		err error
	}
	done := make(chan result, 1)
	go func() {
		msg, err := message.Parse(raw)
		done <- result{msg, err}
	}()
	select {
	case r := <-done:
		return r.msg, r.err
	case <-time.After(d):
		t.Fatalf("Parse did not return within %v on %d bytes", d, len(raw))
		return nil, nil
	}
}
