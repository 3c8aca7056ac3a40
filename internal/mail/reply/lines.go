package reply

import (
	"strings"
	"unicode"
)

// splitLines normalizes line endings and invisible characters and splits the body into lines.
func splitLines(body string) []string {
	body = strings.ReplaceAll(body, "\r\n", "\n")
	body = strings.ReplaceAll(body, "\r", "\n")
	body = strings.Map(dropInvisible, body)
	return strings.Split(body, "\n")
}

// dropInvisible removes byte-order marks, zero-width characters and bidirectional controls (iOS puts a BOM at the start of
// quoted text) and turns non-breaking and other Unicode spaces into plain spaces.
func dropInvisible(r rune) rune {
	switch r {
	case '\ufeff', '\u200b', '\u200c', '\u200d', '\u2060',
		'\u200e', '\u200f', '\u202a', '\u202b', '\u202c', '\u202d', '\u202e', '\u2066', '\u2067', '\u2068', '\u2069':
		return -1
	case '\t':
		return r
	}
	if unicode.Is(unicode.Zs, r) {
		return ' '
	}
	return r
}

// isBlankLine reports whether a line has only whitespace.
func isBlankLine(l string) bool {
	return strings.TrimSpace(l) == ""
}

// isBlank reports whether all lines are blank.
func isBlank(lines []string) bool {
	for _, l := range lines {
		if !isBlankLine(l) {
			return false
		}
	}
	return true
}

// isQuoted reports whether a line is "> "-quoted.
func isQuoted(l string) bool {
	return strings.HasPrefix(strings.TrimLeft(l, " \t"), ">")
}

// unquote removes one level of "> " quoting from a line.
func unquote(l string) string {
	l = strings.TrimLeft(l, " \t")
	l = strings.TrimPrefix(l, ">")
	return strings.TrimPrefix(l, " ")
}

// nextNonBlank returns the index of the first non-blank line at or after i, or len(lines).
func nextNonBlank(lines []string, i int) int {
	for i < len(lines) && isBlankLine(lines[i]) {
		i++
	}
	return i
}

// lastNonBlank returns the index of the last non-blank line, or -1.
func lastNonBlank(lines []string) int {
	for i := len(lines) - 1; i >= 0; i-- {
		if !isBlankLine(lines[i]) {
			return i
		}
	}
	return -1
}

// quoteBlockEnd returns the index just past the quote block starting at i: consecutive quoted
// lines, including blank lines between them and quoted lines a client wrapped, but not trailing
// blank lines.
func quoteBlockEnd(lines []string, i int) int {
	end := i
	for j := i; j < len(lines); j++ {
		switch {
		case isQuoted(lines[j]) || j > i && isWrappedQuote(lines, j):
			end = j + 1
		case !isBlankLine(lines[j]):
			return end
		}
	}
	return end
}

// isWrappedQuote reports whether the unquoted line at j is the end of the quoted line above it,
// wrapped by a client: it sits directly between two quoted lines and either ends with the "> "
// that wrapped off the next line, or closes a parenthesis the line above left open.
func isWrappedQuote(lines []string, j int) bool {
	if j+1 >= len(lines) || !isQuoted(lines[j-1]) || !isQuoted(lines[j+1]) {
		return false
	}
	t := strings.TrimSpace(lines[j])
	if strings.HasSuffix(t, " >") {
		return true
	}
	prev := lines[j-1]
	if strings.Count(prev, "(") > strings.Count(prev, ")") && strings.Count(t, ")") > strings.Count(t, "(") {
		return true
	}
	return continuesSentence(unquote(prev), t)
}

// continuesSentence reports whether t reads as the rest of the sentence prev left unfinished: prev
// ends without sentence punctuation and t is a bare link or starts in lower case ("see the page
// at" / "https://…"). An answer written between quoted lines starts a sentence of its own.
func continuesSentence(prev, t string) bool {
	p := strings.TrimSpace(prev)
	if p == "" || strings.ContainsAny(p[len(p)-1:], ".!?:;") {
		return false
	}
	if strings.HasPrefix(t, "http://") || strings.HasPrefix(t, "https://") || strings.HasPrefix(t, "<http") {
		return !strings.Contains(t, " ")
	}
	r := []rune(t)
	return len(r) > 0 && unicode.IsLower(r[0])
}

// squash lowercases a line and collapses its whitespace, for pattern matching.
func squash(l string) string {
	return strings.ToLower(strings.Join(strings.Fields(l), " "))
}
