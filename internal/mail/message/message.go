package message

import (
	"bytes"
	"errors"
	"fmt"
	"net/textproto"
	"slices"
	"time"

	"github.com/jhillyerd/enmime/v2"
)

// ErrMalformed is wrapped by the error Parse returns when nothing usable can be read from the input.
var ErrMalformed = errors.New("malformed message")

// Message is one parsed email as the router sees it. All strings are valid UTF-8 except
// attachment names, which are kept as decoded from the message (sanitizing happens elsewhere).
type Message struct {
	From    Address // parsed From (name + lowercase address); the first one if there are several
	To, Cc  []Address
	ReplyTo []Address
	Subject string // decoded
	// MessageID, InReplyTo and References are message ids without the surrounding <>.
	MessageID  string
	InReplyTo  string
	References []string
	Date       time.Time // zero when missing or unparseable (a Problem says which)
	// Text is the text/plain body with line endings normalized to "\n". When the message has no
	// plain part, it is the HTML body converted to readable text (blockquotes become "> " lines).
	// Several plain parts (text around an inline image) are joined with a blank line.
	Text        string
	HTML        string
	Attachments []Attachment
	// Headers holds the top-level header fields under textproto.CanonicalMIMEHeaderKey keys
	// ("Dkim-Signature", "List-Id"), values unfolded but otherwise raw (not RFC 2047 decoded).
	Headers map[string][]string
	// Problems lists what the parser complained about, human-readable, for logs and debugging.
	Problems []string
}

// Address is a parsed mailbox.
type Address struct {
	Name string // display name, decoded
	Addr string // lowercase address
}

// String formats the address like "Ana Lopez <ana@example.com>".
func (a Address) String() string {
	if a.Name == "" {
		return a.Addr
	}
	return fmt.Sprintf("%s <%s>", a.Name, a.Addr)
}

// Attachment is one non-body part: a file attachment, an inline image, a forwarded
// message/rfc822, a calendar invite and so on.
type Attachment struct {
	// Name comes from Content-Disposition filename (RFC 2231 too) or Content-Type name; when the
	// part has neither it is "attachment-N" plus an extension guessed from ContentType. Never empty.
	Name        string
	ContentType string // media type without parameters, e.g. "image/png"
	Data        []byte // decoded content
	Inline      bool   // shown in the body (Content-Disposition inline, or referenced by Content-ID)
}

// Header returns the first value of the named top-level header, or "".
func (m *Message) Header(name string) string {
	if v := m.Headers[textproto.CanonicalMIMEHeaderKey(name)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// parser is lenient: it skips broken parts and keeps what it can of corrupt base64 text.
var parser = enmime.NewParser(
	enmime.SkipMalformedParts(true),
	enmime.SetReadPartErrorPolicy(enmime.AllowCorruptTextPartErrorPolicy),
)

// Parse parses a raw RFC 5322 message. Malformed MIME gets a best-effort Message plus Problems,
// or an error wrapping ErrMalformed when nothing usable can be read — never a panic.
// Parse is safe for concurrent use.
func Parse(raw []byte) (msg *Message, err error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, fmt.Errorf("empty input: %w", ErrMalformed)
	}
	raw, truncated := limitParts(raw)
	env, perr := readEnvelope(raw)
	if perr != nil {
		return parseFallback(raw, perr)
	}
	msg = fromEnvelope(env)
	if truncated {
		msg.addProblem(truncationProblem())
	}
	if msg.empty() {
		return nil, fmt.Errorf("no headers and no body found: %w", ErrMalformed)
	}
	return msg, nil
}

// readEnvelope runs enmime and turns a panic inside it into an error, so one hostile message
// cannot take the router down.
func readEnvelope(raw []byte) (env *enmime.Envelope, err error) {
	defer func() {
		if r := recover(); r != nil {
			env, err = nil, fmt.Errorf("mime parser panicked: %v", r)
		}
	}()
	return parser.ReadEnvelope(bytes.NewReader(raw))
}

// fromEnvelope maps enmime's envelope onto a Message.
func fromEnvelope(env *enmime.Envelope) *Message {
	msg := &Message{Headers: copyHeaders(env.Root.Header)}
	msg.setHeaderFields(env.GetHeader)
	msg.Text = bodyText(env)
	msg.HTML = cleanText(env.HTML)
	msg.Attachments = collectAttachments(env)
	for _, e := range env.Errors {
		msg.addProblem(describeError(e))
	}
	return msg
}

// empty reports whether nothing at all could be read.
func (m *Message) empty() bool {
	return len(m.Headers) == 0 && m.Text == "" && m.HTML == "" && len(m.Attachments) == 0
}

// addProblem records one human-readable parse problem, once.
func (m *Message) addProblem(p string) {
	if slices.Contains(m.Problems, p) {
		return
	}
	m.Problems = append(m.Problems, p)
}

// describeError renders an enmime error like "warning: malformed header: …".
func describeError(e *enmime.Error) string {
	sev := "warning"
	if e.Severe {
		sev = "error"
	}
	return fmt.Sprintf("%s: %s: %s", sev, e.Name, e.Detail)
}
