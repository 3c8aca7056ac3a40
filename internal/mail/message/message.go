package message

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/textproto"
	"slices"
	"strings"
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

// Parse parses a raw RFC 5322 message within the default [Limits]. Malformed MIME gets a
// best-effort Message plus Problems, or an error wrapping ErrMalformed when nothing usable can
// be read, or ErrBudget when the message exceeds the limits — never a panic.
// Parse is safe for concurrent use.
func Parse(raw []byte) (*Message, error) {
	return ParseContext(context.Background(), raw, Limits{})
}

// ParseContext is Parse within lim (zero fields mean the defaults). It returns within
// lim.Timeout or when ctx ends, whichever comes first: ctx.Err() unwrapped when ctx ended, an
// error wrapping ErrBudget at the timeout. The parser itself stops reading at that point too;
// what it may still be doing in memory is bounded by MaxParts and MaxBytes.
func ParseContext(ctx context.Context, raw []byte, lim Limits) (*Message, error) {
	lim = lim.withDefaults()
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, fmt.Errorf("empty input: %w", ErrMalformed)
	}
	if len(raw) > lim.MaxBytes {
		return nil, fmt.Errorf("message of %d bytes is larger than %d: %w", len(raw), lim.MaxBytes, ErrBudget)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, lim.Timeout, errTimeout)
	defer cancel()
	type result struct {
		msg *Message
		err error
	}
	done := make(chan result, 1)
	go func() {
		msg, err := parse(ctx, raw, lim)
		done <- result{msg, err}
	}()
	select {
	case r := <-done:
		return r.msg, r.err
	case <-ctx.Done():
		return nil, budgetErr(ctx, lim)
	}
}

// errTimeout is the cause of a parse's context ending at its time budget.
var errTimeout = errors.New("parse timed out")

// budgetErr is the error of a parse whose ctx ended: ErrBudget at the time budget, else the
// caller's ctx.Err().
func budgetErr(ctx context.Context, lim Limits) error {
	if errors.Is(context.Cause(ctx), errTimeout) {
		return fmt.Errorf("not parsed within %v: %w", lim.Timeout, ErrBudget)
	}
	return ctx.Err()
}

// parse does the work of ParseContext; it stops reading once ctx ends.
func parse(ctx context.Context, raw []byte, lim Limits) (*Message, error) {
	sh, err := shape(raw, lim)
	if err != nil {
		return nil, err
	}
	br := &budgetReader{ctx: ctx, r: bytes.NewReader(sh.raw)}
	env, perr := readEnvelopeWith(parser, br)
	if ctx.Err() != nil {
		return nil, budgetErr(ctx, lim)
	}
	if br.eofReads >= maxEOFReads {
		return nil, errEOFReads
	}
	if perr != nil {
		return parseFallback(sh.raw, perr)
	}
	repaired, fallback := repairBodies(ctx, env, sh.raw, raw)
	if ctx.Err() != nil {
		return nil, budgetErr(ctx, lim)
	}
	msg := fromEnvelope(env)
	for _, p := range repaired {
		msg.addProblem(p)
	}
	if b := usedBoundary(env, raw); b != "" {
		inner, err := parse(ctx, rebound(raw, b), lim) // its boundary is declared: no deeper
		if err == nil && (strings.TrimSpace(inner.Text) != "" || len(inner.Attachments) > 0) {
			msg.Text, msg.HTML, msg.Attachments = inner.Text, inner.HTML, inner.Attachments
			msg.addProblem(fmt.Sprintf("warning: the declared boundary never appears; the parts were read with the boundary %q the body uses", b))
		}
	}
	if strings.TrimSpace(msg.Text) == "" && strings.TrimSpace(fallback) != "" {
		msg.Text = cleanText(fallback)
		msg.addProblem("warning: no text part found; the text outside the parts was read as plain text")
	}
	if sh.truncated {
		msg.addProblem(truncationProblem(lim.MaxParts))
	}
	for _, b := range sh.unclosed {
		msg.addProblem(fmt.Sprintf("warning: %s: Boundary %q was not closed correctly", enmime.ErrorMissingBoundary, b))
	}
	if msg.empty() {
		return nil, fmt.Errorf("no headers and no body found: %w", ErrMalformed)
	}
	return msg, nil
}

// budgetReader is what enmime reads from. It fails every read once ctx has ended, and once
// enmime has asked for more after the end too often: each unclosed nesting level doubles those
// reads, so a structure shape could not see the way enmime does still ends within maxEOFReads.
// Either failure ends enmime's parse promptly (an error, unlike EOF, is passed straight up).
type budgetReader struct {
	ctx      context.Context
	r        io.Reader
	eofReads int
}

// maxEOFReads bounds the reads past the end. enmime makes a few per part on well-formed mail
// (a handful per nesting level); 2^12 is far above that and takes microseconds.
const maxEOFReads = 1 << 12

// errEOFReads is the failure of a read past maxEOFReads.
var errEOFReads = fmt.Errorf("mime structure needs more than %d reads past the end (unclosed nesting?): %w", maxEOFReads, ErrBudget)

func (b *budgetReader) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	if b.eofReads >= maxEOFReads {
		return 0, errEOFReads
	}
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.eofReads++
	}
	return n, err
}

// readEnvelopeWith runs enmime's p and turns a panic inside it into an error, so one hostile
// message cannot take the router down.
func readEnvelopeWith(p *enmime.Parser, r io.Reader) (env *enmime.Envelope, err error) {
	defer func() {
		if r := recover(); r != nil {
			env, err = nil, fmt.Errorf("mime parser panicked: %v", r)
		}
	}()
	return p.ReadEnvelope(r)
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
