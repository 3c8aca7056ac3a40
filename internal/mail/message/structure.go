package message

import (
	"bytes"
	"fmt"
	"mime"
	"net/textproto"
	"regexp"
	"strings"
)

// Why this file exists: enmime reads a multipart part through a boundary reader stacked on the
// parent's, one per nesting level, and neither layer remembers reaching the end of its input.
// A read at the end of a part whose boundary is never closed therefore asks the layer below
// twice (a Peek and a ReadByte), which asks the layer below it twice, and so on: 2^depth reads.
// Thirty unclosed levels in under 2 KB took minutes. shape walks the MIME structure once, the
// way enmime will, rejects nesting deeper than MaxDepth, counts parts, and closes every
// boundary the sender left open right where enmime would have ended that part (before an
// enclosing boundary's delimiter, or at the end), so no nested reader ever runs into the end.

// boundaryParam finds a boundary parameter in a Content-Type mime.ParseMediaType rejects.
var boundaryParam = regexp.MustCompile(`(?i)boundary\s*=\s*(?:"([^"\r\n]+)"|([^\s;"]+))`)

// anyBoundaryParam matches anything enmime might read as a boundary parameter, RFC 2231 forms
// included. Every multipart level enmime builds needs one.
var anyBoundaryParam = regexp.MustCompile(`(?i)boundary\s*(?:\*[0-9]*\*?)?\s*=`)

// shaped is raw made safe for enmime.
type shaped struct {
	raw       []byte
	truncated bool     // cut at MaxParts
	repaired  bool     // unclosed boundaries were closed (or the cut closed them)
	unclosed  []string // boundaries the sender left open
}

// shaper walks the lines of a message keeping the stack of open multipart boundaries.
type shaper struct {
	lim   Limits
	in    []byte
	out   bytes.Buffer
	open  []string // boundaries, outermost first
	parts int
	multi int // multipart header blocks entered
	res   shaped
}

// shape checks raw against lim's depth and part limits and closes unclosed boundaries.
func shape(raw []byte, lim Limits) (shaped, error) {
	s := &shaper{lim: lim, in: raw}
	s.out.Grow(len(raw) + 64)
	head, rest := splitHeader(raw)
	s.out.Write(head)
	if err := s.enter(head); err != nil {
		return shaped{}, err
	}
	if err := s.body(rest); err != nil {
		return shaped{}, err
	}
	s.closeFrom(0)
	if err := s.checkAccounted(); err != nil {
		return shaped{}, err
	}
	if !s.res.repaired && !s.res.truncated {
		s.res.raw = raw
		return s.res, nil
	}
	s.res.raw = s.out.Bytes()
	return s.res, nil
}

// body copies the lines after the top-level header, reacting to boundary lines.
func (s *shaper) body(rest []byte) error {
	for len(rest) > 0 {
		line := nextLine(rest)
		rest = rest[len(line):]
		level, final := s.match(line)
		if level < 0 {
			s.out.Write(line)
			continue
		}
		if s.parts++; !final && s.parts > s.lim.MaxParts {
			s.res.truncated = true
			return nil
		}
		s.closeFrom(level + 1)
		if final {
			s.out.Write(line)
			s.open = s.open[:level]
			continue
		}
		s.out.Write(line)
		head, after := splitHeader(rest)
		s.out.Write(head)
		rest = after
		if err := s.enter(head); err != nil {
			return err
		}
	}
	return nil
}

// enter pushes the boundary of a multipart header block, failing past MaxDepth.
func (s *shaper) enter(head []byte) error {
	b := multipartBoundary(head)
	if b == "" {
		return nil
	}
	s.open = append(s.open, b)
	s.multi++
	if len(s.open) > s.lim.MaxDepth {
		return fmt.Errorf("multipart nested deeper than %d levels: %w", s.lim.MaxDepth, ErrBudget)
	}
	return nil
}

// checkAccounted guards against enmime reading a structure shape did not see (a header shape
// parses differently): its unclosed levels would cost 2^levels again. With at most
// blindDepth boundary parameters in the whole message, enmime cannot nest deeper than that
// whatever it sees; with more, every one of them must be a multipart header shape entered.
func (s *shaper) checkAccounted() error {
	limit := max(min(s.lim.MaxDepth, blindDepth), s.multi)
	if n := len(anyBoundaryParam.FindAllIndex(s.in, limit+1)); n > limit {
		return fmt.Errorf("more than %d boundary parameters, only %d of them in multipart headers: %w", limit, s.multi, ErrBudget)
	}
	return nil
}

// blindDepth is how deep enmime may nest where shape cannot vouch for the structure: 2^20
// reads at worst, a fraction of a second.
const blindDepth = 20

// match finds the innermost open boundary line is a delimiter (or, final, a terminator) of;
// -1 when none. Like enmime: "--b" followed by white space or "--b--".
func (s *shaper) match(line []byte) (level int, final bool) {
	if !bytes.HasPrefix(line, []byte("--")) {
		return -1, false
	}
	for i := len(s.open) - 1; i >= 0; i-- {
		after, ok := bytes.CutPrefix(line[2:], []byte(s.open[i]))
		switch {
		case !ok:
		case bytes.HasPrefix(after, []byte("--")):
			return i, true
		case len(after) == 0 || isSpace(after[0]):
			return i, false
		}
	}
	return -1, false
}

// closeFrom writes terminators for the open boundaries from level inward, innermost first.
func (s *shaper) closeFrom(level int) {
	if level >= len(s.open) {
		return
	}
	s.res.repaired = true
	if b := s.out.Bytes(); len(b) > 0 && b[len(b)-1] != '\n' {
		s.out.WriteString("\r\n")
	}
	for i := len(s.open) - 1; i >= level; i-- {
		s.out.WriteString("--" + s.open[i] + "--\r\n")
		if !s.res.truncated {
			s.res.unclosed = append(s.res.unclosed, s.open[i])
		}
	}
	s.open = s.open[:level]
	if level == 0 {
		s.out.WriteString("\r\n") // room for the outermost reader to peek past its terminator
	}
}

// multipartBoundary returns the boundary of a header block whose Content-Type is multipart/*.
func multipartBoundary(head []byte) string {
	ct := contentType(head)
	if !strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "multipart/") {
		return ""
	}
	if _, params, err := mime.ParseMediaType(ct); err == nil && params["boundary"] != "" {
		return params["boundary"]
	}
	if m := boundaryParam.FindStringSubmatch(ct); m != nil {
		return m[1] + m[2]
	}
	return ""
}

// contentType returns the unfolded Content-Type field of a header block, or "".
func contentType(head []byte) string {
	var field []byte
	inField := false
	for rest := head; len(rest) > 0; {
		line := nextLine(rest)
		rest = rest[len(line):]
		switch {
		case inField && len(line) > 0 && (line[0] == ' ' || line[0] == '\t'):
			field = append(field, ' ')
			field = append(field, bytes.TrimSpace(line)...)
		case inField:
			return string(field)
		default:
			name, value, ok := bytes.Cut(line, []byte(":"))
			if ok && textproto.CanonicalMIMEHeaderKey(string(bytes.TrimSpace(name))) == "Content-Type" {
				inField, field = true, append([]byte{}, bytes.TrimSpace(value)...)
			}
		}
	}
	return string(field)
}

// splitHeader splits b after the blank line that ends a header block (all of b when none).
func splitHeader(b []byte) (head, rest []byte) {
	for i := 0; i < len(b); {
		line := nextLine(b[i:])
		i += len(line)
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			return b[:i], b[i:]
		}
	}
	return b, nil
}

// nextLine returns b's first line including its line ending.
func nextLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i+1]
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
