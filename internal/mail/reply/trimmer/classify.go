package trimmer

import "strings"

// The line classes; a body becomes a string of them, one byte per line.
const (
	classDelimiter = 'd'
	classEmbedded  = 'b' // an embedded email marker: an attribution or a forward marker
	classEmpty     = 'e'
	classHeader    = 'h'
	classQuote     = 'q'
	classSignature = 's'
	classText      = 't'
)

// classify returns the class of one line, in the original's order of precedence.
func classify(line string) byte {
	switch {
	case isEmptyLine(line):
		return classEmpty
	case isDelimiter(line):
		return classDelimiter
	}
	lower, runes := strings.ToLower(line), []rune(line)
	switch {
	case isSignature(line, lower, runes):
		return classSignature
	case anyMatch(embedded, lower, runes):
		return classEmbedded
	case anyMatch(emailHeaders, lower, runes):
		return classHeader
	case isQuote(line):
		return classQuote
	}
	return classText
}

// isEmptyLine is `^[[:blank:]]*$`.
func isEmptyLine(line string) bool {
	return strings.Trim(line, " \t") == ""
}

// isQuote is `^[[:blank:]]*>`.
func isQuote(line string) bool {
	return strings.HasPrefix(strings.TrimLeft(line, " \t"), ">")
}

// isDelimiter is `^[[:blank:]]*[\-_,=+~#*ᐧ—]+[[:blank:]]*$`.
func isDelimiter(line string) bool {
	t := strings.Trim(line, " \t")
	if t == "" {
		return false
	}
	for _, r := range t {
		if !strings.ContainsRune("-_,=+~#*ᐧ—", r) {
			return false
		}
	}
	return true
}

// isSignature reports a mobile signature line, markdown links reduced to their text first.
func isSignature(line, lower string, runes []rune) bool {
	if strings.Contains(line, "](") {
		line = markdownLink.ReplaceAllString(line, "$1")
		lower, runes = strings.ToLower(line), []rune(line)
	}
	return anyMatch(signatures, lower, runes)
}

// anyMatch reports whether any of the patterns matches a line (lower-cased text and runes).
func anyMatch(ps []pattern, lower string, runes []rune) bool {
	for _, p := range ps {
		if p.match(lower, runes) {
			return true
		}
	}
	return false
}
