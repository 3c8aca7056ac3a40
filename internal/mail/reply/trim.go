package reply

import (
	"strings"

	"github.com/webordinary/webordinary/internal/mail/reply/trimmer"
)

// trimmed is the first pass: package trimmer (our copy of github.com/dimiro1/reply, the Go port
// of discourse's email_reply_trimmer), then the history and footers it does not know cut off. It keeps what the
// trimmer keeps, including "> " quotes the person answers below.
func trimmed(body string, original []string, own scanResult) string {
	lines := splitLines(trimmer.FromText(body))
	if s := scan(lines); s.start >= 0 {
		lines = lines[:s.start]
	}
	if own.start >= 0 {
		lines = cutAtLine(lines, original[own.start])
	}
	if own.history == historyHeaders {
		lines = cutAtHistory(lines, original, own.start)
	}
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
// unless it left nothing or only quoted lines (and ours has the person's own), kept an unquoted
// line our scan found to be history (an attribution above a quote block, a wrapped quoted
// line), dropped the person's words
// split off a run-on attribution line (content), or it cut at a line our scan holds to be the person's text: a
// "Label: value" line that is no header block ("From: Monday to Friday") or a line that says
// "wrote" without being an attribution.
func choose(own Result, trim string, content, history map[string]bool) string {
	if trim == "" || allQuoted(trim) && !allQuoted(own.Text) {
		return own.Text
	}
	kept := make(map[string]bool)
	for _, l := range strings.Split(trim, "\n") {
		kept[normalize(l)] = true
	}

	for _, l := range strings.Split(own.Text, "\n") {
		if !kept[normalize(l)] && (overcut(l) || content[normalize(l)]) {
			return own.Text
		}
	}
	for _, l := range strings.Split(trim, "\n") {
		if history[normalize(l)] {
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

// cutAtHistory cuts the trimmer's lines where they reach the original line history, at which our
// own scan saw a header block or "Original Message" marker start: the trimmer removes header
// lines one by one and may keep what lies between them ("bob@example.com]" wrapped off a "From:"
// line). Each trimmer line is found in the original in order, after whitespace
// normalization; a line the trimmer rewrote is not found and stays.
func cutAtHistory(lines, original []string, history int) []string {
	at := 0
	for i, l := range lines {
		n := normalize(l)
		if n == "" {
			continue
		}
		for j := at; j < len(original); j++ {
			if normalize(original[j]) == n {
				if j >= history {
					return lines[:i]
				}
				at = j + 1
				break
			}
		}
	}
	return lines
}

// cutAtLine cuts at the first line equal (after whitespace normalization) to the line where our
// own scan saw history start: the trimmer may have removed the rest of a wrapped attribution
// and left its first line.
func cutAtLine(lines []string, history string) []string {
	h := normalize(history)
	for i, l := range lines {
		if normalize(l) == h {
			return lines[:i]
		}
	}
	return lines
}

// allQuoted reports whether every non-blank line of text is quoted.
func allQuoted(text string) bool {
	for _, l := range strings.Split(text, "\n") {
		if !isBlankLine(l) && !isQuoted(l) {
			return false
		}
	}
	return true
}
