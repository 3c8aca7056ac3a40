package reply

import "strings"

// historyKind says how unquoted history (everything to the end of the body) was recognized.
type historyKind int

const (
	historyNone        historyKind = iota
	historyHeaders                 // an Outlook header block or an "Original Message" marker
	historyAttribution             // an attribution line not followed by "> " quoting
)

// scanResult is the line-by-line split of a body.
type scanResult struct {
	kept    []string    // lines the person wrote (signature not yet removed)
	quoted  []string    // lines recognized as history
	forward int         // index of the forward marker line, or -1
	history historyKind // how trailing unquoted history started, if it did
	headers int         // with historyHeaders: index of the first header line after any marker
	start   int         // index where trailing history (or a forward) starts, or -1
	// historyText holds the (normalized) unquoted lines found to be history inside kept text:
	// attribution lines above quote blocks, quoted lines a client wrapped.
	historyText map[string]bool
}

// scan walks the lines top to bottom and sorts them into kept and quoted.
func scan(lines []string) scanResult {
	s := scanResult{forward: -1, start: -1, historyText: make(map[string]bool)}
	for i := 0; i < len(lines); {
		i = s.step(lines, i)
	}
	return s
}

// step classifies the line at i (and the lines belonging to it) and returns the next index.
func (s *scanResult) step(lines []string, i int) int {
	switch {
	case isForwardMarker(lines[i]):
		s.forward, s.start = i, i
		return len(lines)
	case isOriginalMarker(lines[i]):
		return s.startHistory(lines, i, historyHeaders, i+1)
	case isHeaderBlock(lines, i):
		return s.startHistory(lines, i, historyHeaders, i)
	}
	if next, ok := s.attributed(lines, i); ok {
		return next
	}
	if isQuoted(lines[i]) {
		return s.quoteBlock(lines, i)
	}
	s.kept = append(s.kept, lines[i])
	return i + 1
}

// attributed handles an attribution line at i: with a quote block after it both become quoted
// and scanning goes on below (bottom-posting); a strong attribution without one starts
// unquoted history.
func (s *scanResult) attributed(lines []string, i int) (int, bool) {
	if isInlineAttribution(lines[i]) {
		return s.startHistory(lines, i, historyAttribution, -1), true
	}
	n, strong := attribution(lines, i)
	if n == 0 || answeredInline(lines, i, n) {
		return 0, false
	}
	if j := nextNonBlank(lines, i+n); j < len(lines) && isQuoted(lines[j]) {
		end := quoteBlockEnd(lines, j)
		s.quoted = append(s.quoted, lines[i:end]...)
		for _, l := range lines[i:end] {
			if !isBlankLine(l) && !isQuoted(l) {
				s.historyText[normalize(l)] = true
			}
		}
		return end, true
	}
	if strong {
		return s.startHistory(lines, i, historyAttribution, -1), true
	}
	return 0, false
}

// quoteBlock handles a "> " block without attribution at i.
func (s *scanResult) quoteBlock(lines []string, i int) int {
	end := quoteBlockEnd(lines, i)
	if isContentQuote(s.kept, lines, i, end) {
		s.kept = append(s.kept, lines[i:end]...)
	} else {
		s.quoted = append(s.quoted, lines[i:end]...)
	}
	return end
}

// maxContentQuote is the longest "> " block that can count as part of the person's text.
const maxContentQuote = 6

// isContentQuote reports whether the quote block lines[i:end] is part of the instruction rather
// than history: a short, unnested block that the person's own text introduces with a colon
// ("Please change the tagline to:") or that sits tightly between two of their lines.
func isContentQuote(kept, lines []string, i, end int) bool {
	if !shortFlatQuote(lines[i:end]) {
		return false
	}
	last := lastNonBlank(kept)
	if last < 0 {
		return false
	}
	if strings.HasSuffix(strings.TrimSpace(kept[last]), ":") {
		return true
	}
	return last == len(kept)-1 && !isBlankLine(lines[i-1]) && end < len(lines) && isTextLine(lines[end])
}

// shortFlatQuote reports whether a quote block is short and has no nested quoting.
func shortFlatQuote(block []string) bool {
	n := 0
	for _, l := range block {
		if isQuoted(unquote(l)) {
			return false // nested quoting is history
		}
		if !isBlankLine(l) {
			n++
		}
	}
	return n <= maxContentQuote
}

// isTextLine reports whether l is a non-blank, unquoted line.
func isTextLine(l string) bool {
	return !isBlankLine(l) && !isQuoted(l)
}

// startHistory marks everything from i on as history, together with a separator line
// ("________") the person's part ended with. headers is where a header block starts, or -1.
func (s *scanResult) startHistory(lines []string, i int, kind historyKind, headers int) int {
	if last := lastNonBlank(s.kept); last >= 0 && isSeparator(s.kept[last]) {
		s.quoted = append(s.quoted, s.kept[last:]...)
		s.kept = s.kept[:last]
	}
	if last := len(s.kept) - 1; last >= 0 && colonless(append(s.kept[:last+1:last+1], lines[i]), last) {
		s.quoted = append(s.quoted, s.kept[last])
		s.kept = s.kept[:last]
	}
	s.quoted = append(s.quoted, lines[i:]...)
	s.start = i
	s.history = kind
	s.headers = headers
	return len(lines)
}
