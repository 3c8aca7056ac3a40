package reply

import "strings"

// forwardResult builds the Result for a body with a forward marker at s.forward: the text above
// the marker, or, when nothing was written above it, the forwarded message's own new text. When
// the note above only points at the forward ("FYI"), the forward is what the person sends to be
// acted on: the note and the whole forward are the text.
func forwardResult(s scanResult, lines []string, depth int) Result {
	above := finish(s.kept, s.quoted)
	above.Forwarded = true
	if isPointerNote(above.Text) {
		above.Text = joinParts(above.Text, joinText(lines[s.forward:]))
		return above
	}
	if above.Text != "" || depth >= maxForwardDepth {
		above.Quoted = joinParts(above.Quoted, joinText(lines[s.forward:]))
		if above.Text != "" {
			above.Forward = joinText(lines[s.forward:])
		}
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

// pointerPhrase is a note that says nothing of its own but points at what it forwards: "FYI",
// "see below", "for your information" and their translations.
const pointerPhrase = `(fyi|f\.y\.i\.?|fwd?|for your (information|info|reference)|for info|(please |pls )?see (below|attached|the (forwarded )?(message|mail|e-?mail|note) below|forwarded( message| mail| e-?mail)?)|forwarding( this)?|zur (info|kenntnis)|z\.? ?k\.?|siehe unten|pour (info|information|ton info|votre information)|voir ci-dessous|para (tu|su) (información|conocimiento)|(ver|veja) (más )?abaixo|ver (más )?abajo|ter (info|informatie)|zie hieronder|per (info|conoscenza)|vedi sotto|för kännedom|se nedan|til (info|orientering)|se nedenfor|tiedoksi|do wiadomości|para sua informação)`

// pointerNote matches a note made of pointer phrases only.
var pointerNote = lazy(`^` + pointerPhrase + `([\s,;:.!–—-]+` + pointerPhrase + `)*[\s,;:.!]*$`)

// maxPointerNote bounds a pointer note, in bytes.
const maxPointerNote = 80

// isPointerNote reports whether the note above a forward only points at it.
func isPointerNote(note string) bool {
	return note != "" && len(note) <= maxPointerNote && pointerNote.MatchString(squash(note))
}
