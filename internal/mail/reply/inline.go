package reply

// minInlineAnswers is how many quoted passages the person must answer below an attribution for
// the message to count as answered inline.
const minInlineAnswers = 2

// answeredInline reports whether the attribution spanning lines[i:i+n] sits inside the person's
// own text: they wrote above it, and below it they answer at least minInlineAnswers quoted
// passages, each "> " block followed by a line of their own. The quotes are then kept around
// the answers anyway, so dropping the line gains the reader nothing, and it may be the person's
// own words ("About the menu, you wrote:"): when unsure, keep. A single quote answered below it
// is bottom-posting, where the attribution is history.
func answeredInline(lines []string, i, n int) bool {
	if lastNonBlank(lines[:i]) < 0 {
		return false
	}
	answers := 0
	for j := nextNonBlank(lines, i+n); j < len(lines) && isQuoted(lines[j]); {
		below := nextNonBlank(lines, quoteBlockEnd(lines, j))
		if below >= len(lines) || !isAnswer(lines[below]) {
			break
		}
		if answers++; answers == minInlineAnswers {
			return true // no further: every attribution's look stays short on any body
		}
		for j = below; j < len(lines) && !isQuoted(lines[j]); j++ {
		}
	}
	return false
}

// isAnswer reports whether l can be the person's answer below a quote: a line of text, not a
// separator, a footer or the start of other earlier mail.
func isAnswer(l string) bool {
	return kindOf(l) == kindText && !isDelimiter(l)
}
