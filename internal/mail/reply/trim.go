package reply

import (
	"strings"
)

// trimmed is the first pass: the coarse pass over line kinds (coarse.go), then the history and
// footers it does not know cut off. It keeps what the coarse pass keeps, including "> " quotes
// the person answers below.
func trimmed(body string, original []string, own scanResult) string {
	lines := splitLines(coarse(body))
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

// choose picks between our own full extraction and the coarse pass's text. The coarse pass is taken
// unless it left nothing or only quoted lines (and ours has the person's own), kept an unquoted
// line our scan found to be history (an attribution above a quote block, a wrapped quoted
// line), dropped the person's words
// split off a run-on attribution line (content), or it cut at a line our scan holds to be the person's text: a
// "Label: value" line that is no header block ("From: Monday to Friday") or a line that says
// "wrote" without being an attribution.
func choose(own Result, trim string, lines []string, s scanResult, content map[string]bool) string {
	if trim == "" || allQuoted(trim) && !allQuoted(own.Text) {
		return own.Text
	}
	kept := make(map[string]bool)
	for _, l := range strings.Split(trim, "\n") {
		kept[normalize(l)] = true
	}
	if cutShort(own, kept, lines, s) {
		return own.Text
	}

	for _, l := range strings.Split(own.Text, "\n") {
		if !kept[normalize(l)] && (overcut(l) || content[normalize(l)]) {
			return own.Text
		}
	}
	for _, l := range strings.Split(trim, "\n") {
		if s.historyText[normalize(l)] {
			return own.Text
		}
	}
	return trim
}

// overcut reports whether the coarse pass stopped at a content line.
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

// cutAtHistory cuts the coarse pass's lines where they reach the original line history, at which our
// own scan saw a header block or "Original Message" marker start: the coarse pass removes header
// lines one by one and may keep what lies between them ("bob@example.com]" wrapped off a "From:"
// line). Each coarse pass line is found in the original in order, after whitespace
// normalization; a line the coarse pass kept is always found, since it never rewrites a line.
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
// own scan saw history start: the coarse pass may have removed the rest of a wrapped attribution
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

// cutShort reports whether the coarse pass stopped above text our scan holds to be the person's on
// structural evidence: the first line the coarse pass dropped is
//   - a bare delimiter ("____", a lone "-" bullet) below which our scan kept a sentence (not just
//     a name, a title or a list footer, as a signature below a separator is) and that ends where
//     it recognized history (an attribution, a header block) or a "--" signature, or directly
//     above a sentence, so the delimiter was inside the person's text; or
//   - the person's text resuming directly below a "> " block that our scan recognized by its
//     attribution (a closing or an answer written below the quote).
func cutShort(own Result, kept map[string]bool, lines []string, s scanResult) bool {
	first := firstDropped(own.Text, kept)
	if first == "" {
		return false
	}
	if isDelimiter(first) {
		bounded := own.Quoted != "" || strings.HasPrefix(strings.TrimSpace(own.Signature), "--")
		return bounded && sentenceAfter(own.Text, first) || sentenceDirectlyBelow(own.Text, first)
	}
	return belowAttributedQuote(lines, first, s.historyText)
}

// sentenceAfter reports whether a line of text below the line first ends like a sentence.
func sentenceAfter(text, first string) bool {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if l != first {
			continue
		}
		for _, m := range lines[i+1:] {
			if t := strings.TrimSpace(m); !isDelimiter(t) && strings.ContainsAny(lastRune(t), ".!?。！？") {
				return true
			}
		}
		return false
	}
	return false
}

// sentenceDirectlyBelow reports whether the line right below the line first (no blank line
// between) ends like a sentence: "---" / "Also make the footer smaller." is a break inside the
// person's text, where a signature below a rule starts with a name.
func sentenceDirectlyBelow(text, first string) bool {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if l == first && i+1 < len(lines) {
			t := strings.TrimSpace(lines[i+1])
			return t != "" && !isDelimiter(t) && strings.ContainsAny(lastRune(t), ".!?。！？")
		}
	}
	return false
}

// lastRune returns the last character of s, or "".
func lastRune(s string) string {
	r := []rune(s)
	if len(r) == 0 {
		return ""
	}
	return string(r[len(r)-1])
}

// firstDropped returns the first non-blank line of text that kept lacks, or "".
func firstDropped(text string, kept map[string]bool) string {
	for _, l := range strings.Split(text, "\n") {
		if n := normalize(l); n != "" && !kept[n] {
			return l
		}
	}
	return ""
}

// delimiter matches a line made of punctuation only: a separator or a lone bullet.
var delimiter = lazy(`^[\s\-_*=~#+•·—–]+$`)

// isDelimiter reports whether l is a bare delimiter line.
func isDelimiter(l string) bool {
	return delimiter.MatchString(l)
}

// belowAttributedQuote reports whether the line l sits directly below a "> " block (blank lines
// aside) whose attribution our scan recognized.
func belowAttributedQuote(lines []string, l string, history map[string]bool) bool {
	n := normalize(l)
	for j, o := range lines {
		if normalize(o) != n {
			continue
		}
		i := j - 1
		for i >= 0 && isBlankLine(lines[i]) {
			i--
		}
		if i < 0 || !isQuoted(lines[i]) {
			return false
		}
		for i >= 0 && (isQuoted(lines[i]) || isBlankLine(lines[i])) {
			i--
		}
		return i >= 0 && history[normalize(lines[i])]
	}
	return false
}
