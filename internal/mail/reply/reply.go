package reply

import "strings"

// Result is what Extract found in a body.
type Result struct {
	Text      string // the new text, trimmed
	Forwarded bool   // the message forwards another one (the new text is what the forwarder wrote above it)
	Quoted    string // what was removed as quoted history (for debugging)
	Signature string // what was removed as signature/footer
	// Guessed is set when extraction found nothing new but the body has unquoted text: Text is
	// then the best candidate (the unquoted text, attribution and signature removed), and the
	// reply should say the instruction was guessed.
	Guessed bool
	// Cut is set when the body was longer than MaxBody: only its first MaxBody bytes were read.
	Cut bool
	// Forward is the forwarded message (its marker, headers and body) when the person wrote a
	// note above it that is the Text ("put this event on the news page"): what the note is
	// about, for the agent to read. Empty otherwise (also when the note only points at the
	// forward: then the forward is part of Text).
	Forward string
}

// MaxBody is how much of a body Extract reads, in bytes, cut at a line end: far more than any
// instruction, and a bound on the work a sender's body of megabytes can make (extraction
// costs microseconds per byte on some hostile shapes).
const MaxBody = 256 << 10

// Extract returns only the new text a person wrote in an email body: quoted history, signatures
// and mobile footers removed. Forwarded mail is handled deliberately: see Result and the package
// documentation. Extract is a pure function, safe for concurrent use.
func Extract(body string) Result {
	body, cut := head(body, MaxBody)
	r := extract(body)
	r.Cut = cut
	return r
}

// head is body's first lines within max bytes (its first max bytes when the first line is
// longer, a rune split there left out), and whether anything was cut.
func head(body string, max int) (string, bool) {
	if len(body) <= max {
		return body, false
	}
	if i := strings.LastIndexByte(body[:max], '\n'); i >= 0 {
		return body[:i+1], true
	}
	return strings.ToValidUTF8(body[:max], ""), true
}

// extract is Extract on a body of bounded length.
func extract(body string) Result {
	body = dropBanner(body)
	lines, content := splitRunOn(splitLines(body))
	own := extractLines(lines, 0)
	if own.Forwarded {
		return own
	}
	s := scan(lines)
	own.Text = choose(own, trimmed(body, lines, s), lines, s, content)
	if own.Text == "" {
		own.Text = bestCandidate(lines)
		own.Guessed = own.Text != ""
	}
	return own
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

// bestCandidate is the instruction when extraction left nothing: every unquoted line except the
// attribution or header line history was taken to start at, signature removed. An owner who
// wrote below an unquoted "On … wrote:" line is not ignored.
func bestCandidate(lines []string) string {
	s := scan(lines)
	skipFrom, skipTo := s.start, s.start
	if s.start >= 0 {
		n, _ := attribution(lines, s.start)
		skipTo = s.start + max(n, 1)
	}
	var out []string
	for i, l := range lines {
		if isQuoted(l) || (i >= skipFrom && i < skipTo) || label(l) != "" && i >= skipFrom && skipFrom >= 0 && i < skipFrom+headerWindow && s.history == historyHeaders {
			continue
		}
		out = append(out, l)
	}
	if text, _ := stripSignature(out); !isBlank(text) {
		return joinText(text)
	}
	text, sig := cutSigDash(out) // all of it looked like a signature: still the person's words
	if isBlank(text) && len(sig) > 0 {
		text = sig[1:]
	}
	return joinText(text)
}

// banner matches the warning a mail gateway puts on top of mail from outside the organization
// ("CAUTION: This message is from an EXTERNAL SENDER …", "[EXTERNAL] This email originated
// outside …"): it is not the person's text.
var banner = lazy(`^[\[(*]*(caution|warning|attention|external|notice)[\])*]*\s*:?.{0,300}\b(external|outside)\b.{0,300}\b(sender|email|e-mail|message|mail|organi[sz]ation)\b.{0,300}$`)

// maxBannerLen bounds a banner line, in bytes.
const maxBannerLen = 600

// dropBanner removes a gateway banner when it is the body's first non-blank line.
func dropBanner(body string) string {
	start := len(body) - len(strings.TrimLeft(body, " \t\r\n"))
	line, _, _ := strings.Cut(body[start:], "\n")
	if len(line) > maxBannerLen || !banner.MatchString(squash(line)) {
		return body
	}
	return body[:start] + body[start+len(line):]
}
