package reply

import "strings"

// forwardResult builds the Result for a body with a forward marker at s.forward: the text above
// the marker, or, when nothing was written above it, the forwarded message's own new text.
func forwardResult(s scanResult, lines []string, depth int) Result {
	above := finish(s.kept, s.quoted)
	above.Forwarded = true
	if above.Text != "" || depth >= maxForwardDepth {
		above.Quoted = joinParts(above.Quoted, joinText(lines[s.forward:]))
		return above
	}
	headers, rest := forwardedBody(lines[s.forward+1:])
	inner := extractLines(rest, depth+1)
	inner.Forwarded = true
	inner.Quoted = joinParts(above.Quoted, lines[s.forward], joinText(headers), inner.Quoted)
	inner.Signature = joinParts(above.Signature, inner.Signature)
	return inner
}

// forwardedBody splits what follows a forward marker into the forwarded header lines and the
// forwarded message's body. Apple Mail quotes the whole forwarded message with "> "; that one
// level of quoting is removed first.
func forwardedBody(tail []string) (headers, rest []string) {
	tail = unquoteLeadingBlock(tail)
	i := nextNonBlank(tail, 0)
	start := i
	for i < len(tail) && isForwardHeader(tail, i, start) {
		i++
	}
	if i == start {
		return nil, tail
	}
	return tail[start:i], tail[i:]
}

// isForwardHeader reports whether line i still belongs to the header block that began at start:
// a "Label: value" line, or a wrapped continuation of an address list.
func isForwardHeader(tail []string, i, start int) bool {
	l := tail[i]
	if isBlankLine(l) {
		return false
	}
	if label(l) != "" {
		return true
	}
	if i == start {
		return false
	}
	wrapped := i+1 < len(tail) && label(tail[i+1]) != "" // a value wrapped between two labels
	return wrapped || (strings.Contains(l, "@") && !strings.Contains(strings.TrimSpace(l), " "))
}

// unquoteLeadingBlock removes one level of quoting from the quote block the lines start with, if
// they start (after blank lines) with one.
func unquoteLeadingBlock(tail []string) []string {
	i := nextNonBlank(tail, 0)
	if i >= len(tail) || !isQuoted(tail[i]) {
		return tail
	}
	end := quoteBlockEnd(tail, i)
	out := make([]string, 0, len(tail))
	for _, l := range tail[i:end] {
		out = append(out, unquote(l))
	}
	return append(out, tail[end:]...)
}

// joinParts joins the non-empty parts with a blank line.
func joinParts(parts ...string) string {
	var keep []string
	for _, p := range parts {
		if strings.TrimSpace(p) != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, "\n\n")
}
