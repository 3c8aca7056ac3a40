package reply

import (
	"strings"

	dimiro1 "github.com/dimiro1/reply"
)

// trimmed is the first pass: github.com/dimiro1/reply (the Go port of discourse's
// email_reply_trimmer), then the history and footers it does not know cut off. It keeps what the
// trimmer keeps, including "> " quotes the person answers below.
func trimmed(body string, historyLine string) string {
	lines := splitLines(dimiro1.FromText(body))
	if s := scan(lines); s.start >= 0 {
		lines = lines[:s.start]
	}
	lines = cutAtLine(lines, historyLine)
	lines = cutAtFooter(lines)
	text, _ := cutFooters(lines)
	return joinText(text)
}

// cutAtFooter cuts at the first mobile footer line that has text above it: what follows a
// footer is the quoted message, even when nothing marks it as such.
func cutAtFooter(lines []string) []string {
	for i, l := range lines {
		if isFooter(l) && lastNonBlank(lines[:i]) >= 0 {
			return lines[:i]
		}
	}
	return lines
}

// choose picks between our own full extraction and the trimmer's text. The trimmer is taken
// unless it left nothing, or it cut at a line our scan holds to be the person's text: a
// "Label: value" line that is no header block ("From: Monday to Friday") or a line that says
// "wrote" without being an attribution.
func choose(own Result, trim string) string {
	if trim == "" {
		return own.Text
	}
	kept := make(map[string]bool)
	for _, l := range strings.Split(trim, "\n") {
		kept[normalize(l)] = true
	}
	for _, l := range strings.Split(own.Text, "\n") {
		if !kept[normalize(l)] && overcut(l) {
			return own.Text
		}
	}
	return trim
}

// overcut reports whether the trimmer cut at a content line.
func overcut(l string) bool {
	if label(l) != "" {
		return true
	}
	sq := squash(l)
	return strings.Contains(sq, "wrote") || strings.HasPrefix(sq, "quoting ")
}

// normalize collapses whitespace, for comparing two extractions.
func normalize(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// cutAtLine cuts at the first line equal (after whitespace normalization) to the line where our
// own scan saw history start: the trimmer may have removed the rest of a wrapped attribution
// and left its first line.
func cutAtLine(lines []string, history string) []string {
	h := normalize(history)
	if h == "" {
		return lines
	}
	for i, l := range lines {
		if normalize(l) == h {
			return lines[:i]
		}
	}
	return lines
}
