package trimmer

import (
	"regexp"
	"strings"

	"github.com/dlclark/regexp2"
	"github.com/dlclark/regexp2/syntax"
)

// Patterns over the string of line classes (one byte per line), in the order FromText uses them.
var (
	replyAtEnd          = regexp.MustCompile(`^(b[^t]+)*b[bqeh]+t[et]*$`)
	replyAtEndStart     = regexp.MustCompile(`t[et]*$`)
	markerNoQuote       = regexp.MustCompile(`te*b[^q]*$`)
	markerThenQuote     = regexp.MustCompile(`te*b[eqbh]*([te]*)$`)
	textThenQuote       = regexp.MustCompile(`te*[qbe]+$`)
	headerSpanningLines = regexp.MustCompile(`h+[hte]+h+e`)
	headerBlock         = regexp.MustCompile(`t[eq]*h{3,}`)
	trailingQuote       = regexp.MustCompile(`[eq]+$`)
)

// FromText returns the reply text from an email's text body. It is safe for concurrent use.
func FromText(text string) string {
	if strings.TrimSpace(text) == "" {
		return text
	}
	lines := strings.Split(cleanup(text), "\n")
	b := make([]byte, len(lines))
	for i, l := range lines {
		b[i] = classify(l)
	}
	t := &trim{pattern: string(b), lines: lines}
	t.steps()
	return strings.Join(t.lines, "\n")
}

// trim is the class string and the lines it describes, cut down step by step.
type trim struct {
	pattern string
	lines   []string
}

// steps runs the original's rules in its order.
func (t *trim) steps() {
	// remove everything after the first delimiter
	if i := strings.IndexByte(t.pattern, classDelimiter); i >= 0 {
		t.keepTo(i - 1)
	}
	// remove all mobile signatures
	t.drop(classSignature)
	// when the reply is at the end of the email
	if replyAtEnd.MatchString(t.pattern) {
		i := replyAtEndStart.FindStringIndex(t.pattern)[0]
		t.pattern = ""
		t.lines = append([]string{}, t.lines[i:]...)
	}
	// an embedded email marker not followed by a quote: take everything up to the marker
	if m := markerNoQuote.FindStringIndex(t.pattern); m != nil {
		t.keepTo(m[0])
	}
	// an embedded email marker followed by a huge quote: take everything up to the marker
	if m := markerThenQuote.FindStringSubmatchIndex(t.pattern); m != nil && strings.Count(t.pattern[m[2]:m[3]], "t") < 7 {
		t.keepTo(m[0])
	}
	// some text before a huge quote ending the email: remove the quote
	if m := textThenQuote.FindStringIndex(t.pattern); m != nil {
		t.keepTo(m[0])
	}
	// remove the embedded email markers still there
	t.drop(classEmbedded)
	t.headers()
	// remove trailing quotes when there is at least one line of text
	if m := trailingQuote.FindStringIndex(t.pattern); m != nil && strings.IndexByte(t.pattern, classText) >= 0 {
		t.keepTo(m[0] - 1)
	}
}

// headers handles email headers: those spanning several lines are made one block; at least
// three consecutive header lines after text end the reply; any other header line is removed.
func (t *trim) headers() {
	if m := headerSpanningLines.FindStringIndex(t.pattern); m != nil {
		p := []byte(t.pattern)
		for i := m[0]; i < m[1]; i++ {
			p[i] = classHeader
		}
		t.pattern = string(p)
	}
	if m := headerBlock.FindStringIndex(t.pattern); m != nil {
		t.keepTo(m[0])
	}
	t.drop(classHeader)
}

// keepTo keeps the lines 0..end inclusive (Ruby's [0..end]; end -1 keeps nothing). Like the
// original, the class string keeps the same count of bytes.
func (t *trim) keepTo(end int) {
	t.pattern = t.pattern[:end+1]
	t.lines = append([]string{}, t.lines[:end+1]...)
}

// drop removes every line of class c. The lines stay as they are when the class string no longer
// describes them (after the reply-at-end rule emptied it), as in the original.
func (t *trim) drop(c byte) {
	if strings.IndexByte(t.pattern, c) < 0 {
		return
	}
	var p []byte
	var lines []string
	for i := 0; i < len(t.pattern); i++ {
		if t.pattern[i] != c {
			p = append(p, t.pattern[i])
			lines = append(lines, t.lines[i])
		}
	}
	t.pattern, t.lines = string(p), lines
}

// cleanup normalises line endings, removes PGP markers, unsubscribe links and alias-style quote
// markers, rewrites enclosed quotes and other quote formats as "> ", and joins embedded email
// markers that span several lines.
func cleanup(text string) string {
	t := newText(strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(text))
	for _, p := range pgpMarkers {
		t.replace(p, "")
	}
	t.replace(unsubscribe, "")
	t.replace(alias, "")
	t.replaceFunc(enclosedOne, func(m regexp2.Match) string { return "> " + m.GroupByNumber(2).String() })
	t.replaceFunc(enclosedTwo, func(m regexp2.Match) string { return "> " + m.GroupByNumber(1).String() })
	t.replaceFunc(quotesFormat, func(m regexp2.Match) string {
		return quoteMarker.ReplaceAllString(m.GroupByNumber(1).String(), ">")
	})
	for _, p := range fixEmbedded {
		t.replaceFunc(p, joinMarker)
	}
	return strings.TrimSpace(t.s)
}

// text is the body being cleaned up, with its lower-cased form for the prefilters.
type text struct{ s, lower string }

func newText(s string) *text { return &text{s: s, lower: strings.ToLower(s)} }

// replace replaces every match of p with repl.
func (t *text) replace(p pattern, repl string) {
	t.replaceFunc(p, func(regexp2.Match) string { return repl })
}

// replaceFunc replaces every match of p with what f returns.
func (t *text) replaceFunc(p pattern, f func(regexp2.Match) string) {
	if !p.possible(t.lower) {
		return
	}
	if s := replaceFunc(p, t.s, f); s != t.s {
		t.s, t.lower = s, strings.ToLower(s)
	}
}

// joinMarker puts an embedded email marker spanning up to five lines on one line.
func joinMarker(m regexp2.Match) string {
	if strings.Count(m.String(), "\n") > 4 {
		return m.String()
	}
	s, _ := embeddedBreaks.Replace(m.String(), " ", 0, -1)
	return s
}

// replaceFunc replaces every match of p in text, left to right, with what f returns; a timeout
// leaves text as it was. Where p says where a match can start, the anchored expression runs only
// there: the leftmost match is the same, since no other position can start one.
func replaceFunc(p pattern, text string, f func(regexp2.Match) string) string {
	if p.line == nil && !p.digits {
		if s, err := p.re.ReplaceFunc(text, f, 0, -1); err == nil {
			return s
		}
		return text
	}
	runes := []rune(text)
	var b strings.Builder
	pos := 0
	for i := p.next(runes, 0); i >= 0; i = p.next(runes, i) {
		m, err := p.at.FindRunesMatchStartingAt(runes, i)
		if err != nil {
			return text
		}
		if m == nil {
			i++
			continue
		}
		b.WriteString(string(runes[pos:m.Index]))
		b.WriteString(f(*m))
		pos = m.Index + m.Length
		i = pos
	}
	if b.Len() == 0 && pos == 0 {
		return text // no match: as regexp2, the text as it was (invalid UTF-8 included)
	}
	b.WriteString(string(runes[pos:]))
	return b.String()
}

// next returns the first position at or after from where a match of p can start, or -1.
func (p pattern) next(runes []rune, from int) int {
	for i := from; i < len(runes); i++ {
		if p.digits {
			if fourDigitsAt(runes, i) {
				return i
			}
			continue
		}
		if i > 0 && runes[i-1] != '\n' {
			continue
		}
		end := i
		for end < len(runes) && runes[end] != '\n' {
			end++
		}
		if p.line(runes[i:end]) {
			return i
		}
		i = end
	}
	return -1
}

// digit is regexp2's \d.
var digit = syntax.DigitClass()

// fourDigitsAt reports whether four digits start at i.
func fourDigitsAt(runes []rune, i int) bool {
	if i+4 > len(runes) {
		return false
	}
	for _, r := range runes[i : i+4] {
		if (r < '0' || r > '9') && (r < 0x80 || !digit.CharIn(r)) {
			return false
		}
	}
	return true
}
