package message

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"mime/quotedprintable"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/jhillyerd/enmime/v2"
)

// Why this file exists: a body that comes out of decoding as noise, or as nothing, loses the
// person's instruction. Two shapes do that in real mail: a charset label that lies (a client
// declares Big5 or ISO-8859-1 and writes UTF-8; read as Big5, every character turns into
// another), and a multipart message whose body has no parts at all (the boundary never
// appears, so enmime finds no text). Both fall back to the bytes as sent.

// rawParser reads the same structure as parser without decoding any part's content, so a
// part's bytes can be looked at before the declared charset is applied to them.
var rawParser = enmime.NewParser(
	enmime.SkipMalformedParts(true),
	enmime.SetReadPartErrorPolicy(enmime.AllowCorruptTextPartErrorPolicy),
	enmime.RawContent(true),
)

// repairBodies fixes env in place where decoding lost the text. It returns what it did, for
// Problems, and the text to fall back to should the body still come out empty. shaped is the
// message enmime read (after shape), raw the message as sent.
func repairBodies(ctx context.Context, env *enmime.Envelope, shaped, raw []byte) (problems []string, fallback string) {
	if p := readMislabeled(ctx, env, shaped); p != "" {
		problems = append(problems, p)
	}
	return problems, multipartFallback(env, raw)
}

// multipartFallback is the text of a multipart message in which enmime found no text or HTML
// part: its whole body, as sent, when it has no parts at all (the boundary never appears), or
// else the text a client put before the first part (the MIME notice for non-MIME readers left
// out). It is "" when there is none.
func multipartFallback(env *enmime.Envelope, raw []byte) string {
	root := env.Root
	if !strings.HasPrefix(root.ContentType, "multipart/") || env.Text != "" || env.HTML != "" {
		return ""
	}
	head, body := splitHeader(raw)
	if root.FirstChild == nil {
		return string(body)
	}
	b := multipartBoundary(head)
	if b == "" {
		return ""
	}
	return preamble(body, "--"+b)
}

// preamble is body's lines before the first that starts with delim, the MIME notice left out.
// It reads one line at a time: a sender's body of millions of short lines costs its size, not
// a slice entry per line.
func preamble(body []byte, delim string) string {
	var out strings.Builder
	first := true
	for rest := body; len(rest) > 0; {
		line, next, _ := bytes.Cut(rest, []byte("\n"))
		rest = next
		if bytes.HasPrefix(line, []byte(delim)) {
			break
		}
		if mimeNotice.Match(line) {
			continue
		}
		if !first {
			out.WriteByte('\n')
		}
		out.Write(line)
		first = false
	}
	return out.String()
}

// mimeNotice matches the line MIME writers put before the first part for readers that do not
// know MIME ("This is a multi-part message in MIME format.").
var mimeNotice = regexp.MustCompile(`(?i)\bmime\b.{0,40}\bformat\b|\bmulti-?part message\b`)

// readMislabeled re-reads every text part whose declared charset is not UTF-8 but whose bytes
// are (and hold more than ASCII) as UTF-8: such bytes are almost never text in the declared
// charset, while UTF-8 under a wrong label is a common client bug. It returns a problem line
// when it changed anything.
func readMislabeled(ctx context.Context, env *enmime.Envelope, raw []byte) string {
	suspects := mislabelSuspects(env.Root)
	if len(suspects) == 0 {
		return ""
	}
	rawEnv, err := readEnvelopeWith(rawParser, &budgetReader{ctx: ctx, r: bytes.NewReader(raw)})
	if err != nil || rawEnv == nil {
		return ""
	}
	undecoded := make(map[string]*enmime.Part)
	walkParts(rawEnv.Root, func(p *enmime.Part) { undecoded[p.PartID] = p })
	var fixed []string
	for _, p := range suspects {
		r := undecoded[p.PartID]
		if r == nil || r.ContentType != p.ContentType {
			continue
		}
		b, ok := decodeTransfer(r.Content, r.Header.Get("Content-Transfer-Encoding"))
		if !ok || !utf8.Valid(b) || isASCII(b) {
			continue
		}
		replaceContent(env, p, b)
		fixed = append(fixed, declaredCharset(p))
	}
	if len(fixed) == 0 {
		return ""
	}
	return "warning: text declared as " + strings.Join(fixed, ", ") + " is UTF-8; read as UTF-8"
}

// mislabelSuspects returns the text body parts under p that were decoded from a charset other
// than UTF-8 (a charset enmime detected as UTF-8 is no suspect).
func mislabelSuspects(root *enmime.Part) []*enmime.Part {
	var out []*enmime.Part
	walkParts(root, func(p *enmime.Part) {
		if p.ContentType != "text/plain" && p.ContentType != "text/html" || p.Disposition == "attachment" {
			return
		}
		used := strings.ToLower(strings.TrimSpace(p.Charset)) // detected, or else declared
		if used == "" || isUTF8Name(used) || used == "us-ascii" {
			return
		}
		out = append(out, p)
	})
	return out
}

// declaredCharset is the charset p's header names.
func declaredCharset(p *enmime.Part) string {
	if p.OrigCharset != "" {
		return p.OrigCharset
	}
	return p.Charset
}

// isUTF8Name reports whether a lowercased charset name means UTF-8.
func isUTF8Name(cs string) bool { return cs == "utf-8" || cs == "utf8" }

// replaceContent puts b in place of p's decoded content, in the envelope's bodies too.
func replaceContent(env *enmime.Envelope, p *enmime.Part, b []byte) {
	old := string(p.Content)
	p.Content = b
	switch {
	case p.ContentType == "text/plain" && env.Text == old:
		env.Text = string(b)
	case p.ContentType == "text/html" && env.HTML == old:
		env.HTML = string(b)
		if p == env.Root {
			env.Text = "" // it was converted from the noise; bodyText converts again
		}
	}
}

// walkParts calls f on p and every part under it, depth first.
func walkParts(p *enmime.Part, f func(*enmime.Part)) {
	for ; p != nil; p = p.NextSibling {
		f(p)
		walkParts(p.FirstChild, f)
	}
}

// decodeTransfer undoes a Content-Transfer-Encoding; ok is false when the content does not
// decode cleanly (the caller then keeps what enmime made of it).
func decodeTransfer(b []byte, cte string) ([]byte, bool) {
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "base64":
		clean := bytes.TrimRight(bytes.Join(bytes.Fields(b), nil), "=")
		out, err := base64.RawStdEncoding.DecodeString(string(clean))
		return out, err == nil
	case "quoted-printable":
		out, err := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(b)))
		return out, err == nil
	}
	return b, true
}

// isASCII reports whether b has only 7-bit bytes.
func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// delimiterLine matches a boundary delimiter line ("--X") with a boundary of RFC 2046's
// characters, spaces left out.
var delimiterLine = regexp.MustCompile(`^--([0-9A-Za-z'()+_,./:=?-]{1,70})\r?$`)

// usedBoundary returns the boundary a multipart message without parts actually uses when it is
// not the one its header declares: the body's first non-blank line is "--X" and a MIME header
// field follows it. It returns "" otherwise.
func usedBoundary(env *enmime.Envelope, raw []byte) string {
	root := env.Root
	if !strings.HasPrefix(root.ContentType, "multipart/") || root.FirstChild != nil {
		return ""
	}
	head, body := splitHeader(raw)
	lines := strings.SplitN(strings.TrimLeft(string(body), "\r\n \t"), "\n", 3)
	if len(lines) < 2 {
		return ""
	}
	m := delimiterLine.FindStringSubmatch(lines[0])
	if m == nil || m[1] == multipartBoundary(head) || !strings.HasPrefix(strings.ToLower(lines[1]), "content-") {
		return ""
	}
	return m[1]
}

// rebound is raw's body under a multipart/mixed header with boundary b.
func rebound(raw []byte, b string) []byte {
	_, body := splitHeader(raw)
	return append([]byte("Content-Type: multipart/mixed; boundary=\""+b+"\"\r\n\r\n"), body...)
}
