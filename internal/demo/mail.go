package demo

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"strings"
	"time"
	"unicode/utf8"
)

// SampleInstruction is the quick start's first email: two edits the demo agent understands.
const SampleInstruction = "Make the header green and add a paragraph saying Fresh bread every morning."

// SampleSubject is the subject of the quick start's sample email.
const SampleSubject = "Homepage changes"

// MoreInstructions are further instructions to try on the sample site, one email each.
func MoreInstructions() []string {
	return []string{
		"Please set the title to “Sunrise Bakery & Café”.",
		"Replace $3.50 with $3.80 in index.html.",
		"Add a page called Contact, then make the background #fdf6e3.",
		"Could you replace Harbour Street with Quay Road?",
	}
}

// SampleMessage returns an RFC 5322 plain-text email from one address to another, dated now,
// with a new Message-ID, ready for DKIM signing and delivery to the intake. from and to are
// addresses, with or without a display name ("Ann <ann@example.com>").
func SampleMessage(from, to, subject, body string) ([]byte, error) {
	f, err := mail.ParseAddress(from)
	if err != nil {
		return nil, fmt.Errorf("demo: sender %q: %w", from, err)
	}
	t, err := mail.ParseAddress(to)
	if err != nil {
		return nil, fmt.Errorf("demo: recipient %q: %w", to, err)
	}
	return compose(f, t, subject, body, time.Now(), messageID(f.Address)), nil
}

func compose(from, to *mail.Address, subject, body string, date time.Time, id string) []byte {
	var b bytes.Buffer
	header := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, v) }
	header("From", from.String())
	header("To", to.String())
	header("Subject", mime.QEncoding.Encode("utf-8", subject))
	header("Date", date.Format(time.RFC1123Z))
	header("Message-ID", id)
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	text := crlf(body)
	if plain(text) {
		header("Content-Transfer-Encoding", "7bit")
		b.WriteString("\r\n" + text)
		return b.Bytes()
	}
	header("Content-Transfer-Encoding", "quoted-printable")
	b.WriteString("\r\n")
	w := quotedprintable.NewWriter(&b)
	_, _ = w.Write([]byte(text))
	_ = w.Close()
	return b.Bytes()
}

// crlf gives body CRLF line endings and a final line break.
func crlf(body string) string {
	body = strings.ReplaceAll(strings.ReplaceAll(body, "\r\n", "\n"), "\n", "\r\n")
	if !strings.HasSuffix(body, "\r\n") {
		body += "\r\n"
	}
	return body
}

// plain is true for ASCII text with lines short enough to send as is.
func plain(text string) bool {
	for _, line := range strings.Split(text, "\r\n") {
		if len(line) > 998 {
			return false
		}
	}
	for i := 0; i < len(text); i++ {
		if text[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// messageID is a new Message-ID in the sender's domain.
func messageID(addr string) string {
	_, domain, ok := strings.Cut(addr, "@")
	if !ok || domain == "" {
		domain = "webordinary.invalid"
	}
	return fmt.Sprintf("<demo.%s@%s>", rand.Text(), domain)
}
