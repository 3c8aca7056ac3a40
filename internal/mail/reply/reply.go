package reply

import "strings"

// Result is what Extract found in a body.
type Result struct {
	Text      string // the new text, trimmed
	Forwarded bool   // the message forwards another one (the new text is what the forwarder wrote above it)
	Quoted    string // what was removed as quoted history (for debugging)
	Signature string // what was removed as signature/footer
}

// Extract returns only the new text a person wrote in an email body: quoted history, signatures
// and mobile footers removed. Forwarded mail is handled deliberately: see Result and the package
// documentation. Extract is a pure function, safe for concurrent use.
func Extract(body string) Result {
	return extractLines(splitLines(body), 0)
}

// maxForwardDepth bounds recursion into forwarded-within-forwarded messages.
const maxForwardDepth = 5

// extractLines runs the scan and turns its outcome into a Result.
func extractLines(lines []string, depth int) Result {
	s := scan(lines)
	if s.forward >= 0 {
		return forwardResult(s, lines, depth)
	}
	if s.history == historyHeaders && isBlank(s.kept) && depth < maxForwardDepth {
		if r, ok := headerOnlyForward(s, lines, depth); ok {
			return r
		}
	}
	return finish(s.kept, s.quoted)
}

// finish strips the signature from the kept lines and assembles the Result.
func finish(kept, quoted []string) Result {
	text, sig := stripSignature(kept)
	return Result{
		Text:      joinText(text),
		Quoted:    joinText(quoted),
		Signature: joinText(sig),
	}
}

// joinText joins lines, right-trims each, collapses runs of blank lines and trims the result.
func joinText(lines []string) string {
	var b strings.Builder
	blank := false
	for _, l := range lines {
		l = strings.TrimRight(l, " \t")
		if l == "" {
			blank = true
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n")
			if blank {
				b.WriteString("\n")
			}
		}
		blank = false
		b.WriteString(l)
	}
	return strings.TrimSpace(b.String())
}
