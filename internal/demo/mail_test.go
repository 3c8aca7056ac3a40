package demo

import (
	"bytes"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"testing"
)

func TestSampleMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, from, to, subject, body string
		encoding                      string
	}{
		{"sample", "Ann Baker <ann@sunrise.example>", "edits@webordinary.example", SampleSubject, SampleInstruction, "7bit"},
		{"unicode", "ann@sunrise.example", "Site <edits@webordinary.example>", "Café update", "Please set the title to “Sunrise Café”.\n", "quoted-printable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			raw, err := SampleMessage(tt.from, tt.to, tt.subject, tt.body)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(bytes.ReplaceAll(raw, []byte("\r\n"), nil), []byte("\n")) {
				t.Error("a line ends without CR")
			}
			msg, err := mail.ReadMessage(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			h := msg.Header
			subject, _ := new(mime.WordDecoder).DecodeHeader(h.Get("Subject"))
			from, _ := h.AddressList("From")
			if subject != tt.subject || len(from) != 1 || !strings.HasSuffix(h.Get("Message-ID"), "@sunrise.example>") {
				t.Errorf("headers: subject %q, from %v, message-id %q", subject, from, h.Get("Message-ID"))
			}
			if _, err := h.Date(); err != nil {
				t.Errorf("Date: %v", err)
			}
			if got := h.Get("Content-Transfer-Encoding"); got != tt.encoding {
				t.Errorf("encoding = %s, want %s", got, tt.encoding)
			}
			body, _ := io.ReadAll(msg.Body)
			if tt.encoding == "quoted-printable" {
				body, _ = io.ReadAll(quotedprintable.NewReader(bytes.NewReader(body)))
			}
			if got := strings.TrimSpace(strings.ReplaceAll(string(body), "\r\n", "\n")); got != strings.TrimSpace(tt.body) {
				t.Errorf("body = %q, want %q", got, tt.body)
			}
		})
	}
}

func TestSampleMessageBadAddress(t *testing.T) {
	t.Parallel()
	if _, err := SampleMessage("not an address", "x@example.com", "s", "b"); err == nil {
		t.Error("no error for a bad sender")
	}
}

// TestMoreInstructions checks that every suggested instruction works on the sample site, in
// order, after the sample instruction.
func TestMoreInstructions(t *testing.T) {
	t.Parallel()
	dir := setup(t)
	for _, instruction := range append([]string{SampleInstruction}, MoreInstructions()...) {
		if _, _, err := Edit(dir, instruction); err != nil {
			t.Errorf("%q: %v", instruction, err)
		}
	}
}
