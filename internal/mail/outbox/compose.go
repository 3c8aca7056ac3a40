package outbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/textproto"
	"strings"
	"time"
)

// Compose renders r as a complete RFC 5322 message: multipart/alternative with a text/plain and
// a text/html part (UTF-8; quoted-printable where needed) — inside a multipart/related with the
// pictures when r has Images, which the HTML shows inline (cid:) —, CRLF line endings, and the headers
// From, To, Reply-To, Subject, Date, Message-ID, In-Reply-To, References, Auto-Submitted:
// auto-replied, X-Auto-Response-Suppress: All and X-Webordinary-Job. Everything placed in the
// HTML part is escaped. The output depends only on r and now.
func Compose(r Reply, now time.Time) ([]byte, error) {
	if err := r.validate(); err != nil {
		return nil, fmt.Errorf("compose: %w", err)
	}
	subject := replySubject(r.Subject)
	c := bodyOf(r)
	html, err := renderHTML(subject, c)
	if err != nil {
		return nil, fmt.Errorf("compose: render html: %w", err)
	}
	body, boundary, err := alternative(renderText(c), html)
	if err != nil {
		return nil, fmt.Errorf("compose: %w", err)
	}
	ctype := mime.FormatMediaType("multipart/alternative", map[string]string{"boundary": boundary})
	if shown := c.images(); len(shown) > 0 {
		if body, ctype, err = related(body, boundary, shown); err != nil {
			return nil, fmt.Errorf("compose: %w", err)
		}
	}
	h, err := headers(r, subject, ctype, now)
	if err != nil {
		return nil, fmt.Errorf("compose: %w", err)
	}
	return append(h, body...), nil
}

// header is one header field; values are already encoded.
type header struct{ name, value string }

// headers renders the message header block, ending with the empty line.
func headers(r Reply, subject, contentType string, now time.Time) ([]byte, error) {
	replyTo, err := r.replyTo()
	if err != nil {
		return nil, err
	}
	fields := []header{
		{"Date", now.Format(time.RFC1123Z)},
		{"From", r.From.String()},
		{"To", r.To.String()},
		{"Reply-To", replyTo},
		{"Subject", encodeWords(subject)},
		{"Message-ID", "<" + r.messageID() + ">"},
		{"In-Reply-To", angle(cleanID(r.InReplyTo))},
		{"References", foldIDs(references(r.References, r.InReplyTo))},
		{"MIME-Version", "1.0"},
		{"Content-Type", contentType},
		{"Auto-Submitted", "auto-replied"},
		{"X-Auto-Response-Suppress", "All"},
		{"X-Webordinary-Job", encodeWords(oneLine(r.JobID))},
	}
	var b bytes.Buffer
	for _, f := range fields {
		if f.value != "" {
			b.WriteString(f.name + ": " + f.value + "\r\n")
		}
	}
	b.WriteString("\r\n")
	return b.Bytes(), nil
}

// encodeWords RFC 2047-encodes a header value if it is not plain ASCII, folding between the
// encoded words so no line grows too long.
func encodeWords(s string) string {
	enc := mime.QEncoding.Encode("utf-8", s)
	if enc == s {
		return s
	}
	return strings.ReplaceAll(enc, "?= =?", "?=\r\n =?")
}

func angle(id string) string {
	if id == "" {
		return ""
	}
	return "<" + id + ">"
}

// foldIDs renders Message-IDs one per line.
func foldIDs(ids []string) string {
	for i, id := range ids {
		ids[i] = angle(id)
	}
	return strings.Join(ids, "\r\n ")
}

// alternative renders the multipart/alternative body, plain text first. The boundary is
// derived from the content and starts with "=_", which quoted-printable never produces, so it
// cannot collide with a line of either part.
func alternative(text, html string) ([]byte, string, error) {
	sum := sha256.Sum256([]byte(text + "\x00" + html))
	boundary := "=_wo_" + hex.EncodeToString(sum[:12])
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if err := w.SetBoundary(boundary); err != nil {
		return nil, "", err
	}
	if err := writePart(w, "text/plain; charset=utf-8", text); err != nil {
		return nil, "", err
	}
	if err := writePart(w, "text/html; charset=utf-8", html); err != nil {
		return nil, "", err
	}
	if err := w.Close(); err != nil {
		return nil, "", err
	}
	return b.Bytes(), boundary, nil
}

// writePart writes one part, as 7bit when it is short-lined ASCII, else quoted-printable.
func writePart(w *multipart.Writer, contentType, body string) error {
	body = strings.ReplaceAll(body, "\r\n", "\n")
	encoding := "7bit"
	if needsQP(body) {
		encoding = "quoted-printable"
	}
	pw, err := w.CreatePart(textproto.MIMEHeader{
		"Content-Type":              {contentType},
		"Content-Transfer-Encoding": {encoding},
	})
	if err != nil {
		return err
	}
	if encoding == "7bit" {
		_, err = pw.Write([]byte(strings.ReplaceAll(body, "\n", "\r\n")))
		return err
	}
	qp := quotedprintable.NewWriter(pw)
	if _, err := qp.Write([]byte(body)); err != nil {
		return err
	}
	return qp.Close()
}

// needsQP reports whether s has non-ASCII or control bytes, or lines longer than 76 bytes.
func needsQP(s string) bool {
	for line := range strings.SplitSeq(s, "\n") {
		if len(line) > 76 {
			return true
		}
		for i := 0; i < len(line); i++ {
			if c := line[i]; c >= 0x7f || (c < ' ' && c != '\t') {
				return true
			}
		}
	}
	return false
}
