package reply

import (
	"strings"
)

// lineKind is what the coarse pass takes one line to be.
type lineKind byte

const (
	kindBlank  lineKind = iota
	kindRule            // a line of punctuation only: a separator
	kindFooter          // a mobile or webmail footer ("Sent from my iPhone")
	kindMarker          // where earlier mail begins: an attribution, an "Original Message" or forward marker
	kindHeader          // a "From:/Sent:/To:/Subject:" line of an earlier message
	kindQuote           // a "> " line
	kindText            // anything else: possibly the person's words
)

// maxTextAmidQuotes is how many text lines may sit between the quotes below a marker and still
// be taken for an answer the person wrote inside earlier mail rather than new text.
const maxTextAmidQuotes = 6

// coarse is the first, coarse pass: it gives each line a kind and cuts where the kinds say the
// person's text ends, without looking at what the lines say beyond their kind. It keeps "> "
// quotes the person answers below, and a body that is nothing but a quote. The second pass
// (choose) decides between its text and the line scan's.
func coarse(body string) string {
	lines := splitLines(strings.TrimSpace(body))
	kinds := classifyLines(lines)
	c := &cut{lines: lines, kinds: kinds}
	c.run()
	return strings.Join(c.lines, "\n")
}

// classifyLines gives every line its kind; an attribution wrapped over several lines is a
// marker on each of them.
func classifyLines(lines []string) []lineKind {
	kinds := make([]lineKind, len(lines))
	for i := 0; i < len(lines); i++ {
		n, _ := attribution(lines, i)
		if n == 0 && isLooseMarker(lines[i]) {
			n = wroteBelow(lines, i)
		}
		if n == 0 && colonless(lines, i) {
			n = 1
		}
		if n > 0 {
			k := kindMarker
			if answeredInline(lines, i, n) {
				k = kindText // inside the person's text: see answeredInline
			}
			for j := i; j < i+n; j++ {
				kinds[j] = k
			}
			i += n - 1
			continue
		}
		kinds[i] = kindOf(lines[i])
	}
	return kinds
}

// kindOf is the kind of a single line.
func kindOf(l string) lineKind {
	switch {
	case isBlankLine(l):
		return kindBlank
	case isRule(l):
		return kindRule
	case isFooter(l):
		return kindFooter
	case isOriginalMarker(l) || isForwardMarker(l):
		return kindMarker
	case isHeaderLabel(label(l)):
		return kindHeader
	case isQuoted(l) || initialsQuote.MatchString(l):
		return kindQuote
	}
	return kindText
}

// initialsQuote is a quote marked with the quoted person's initials ("JD> "), as some
// clients and mailing lists write it.
var initialsQuote = lazy(`^\s*[A-Z]{1,3}>`)

// isRule reports a line made of separator characters only (the Gmail signature dot included).
func isRule(l string) bool {
	t := strings.TrimSpace(l)
	return t != "" && strings.Trim(t, "-_=+~#*,—–ᐧ") == ""
}

// isHeaderLabel reports whether lbl labels a line of an earlier message's header block.
func isHeaderLabel(lbl string) bool {
	return lbl != "" && (fromLabels[lbl] || sentLabels[lbl] || toLabels[lbl] || subjectLabels[lbl])
}

// cut is the body being cut down, line and kind side by side.
type cut struct {
	lines []string
	kinds []lineKind
}

// run applies the cuts in order: each looks at what the ones before left.
func (c *cut) run() {
	if i := c.first(kindRule); i >= 0 && !c.loneDash(i) {
		c.keep(i)
	}
	c.footers()
	if c.bottomPosted() {
		return
	}
	if i := c.textAboveMarker(); i >= 0 {
		c.keep(i + 1)
	}
	if i := c.textAboveQuotesToEnd(); i >= 0 {
		c.keep(i + 1)
	}
	c.drop(kindMarker)
	c.headerBlocks()
	if c.first(kindText) >= 0 {
		c.keep(c.trailingQuotes())
	}
}

// loneDash reports whether the rule at i is a single typographic dash ("—", "–") with nothing
// but text below it: no signature separator anyone types on purpose, and no earlier mail
// follows, so when unsure the text below it is kept.
func (c *cut) loneDash(i int) bool {
	if t := strings.TrimSpace(c.lines[i]); t != "—" && t != "–" {
		return false
	}
	for _, k := range c.kinds[i+1:] {
		if k != kindText && k != kindBlank && k != kindRule {
			return false
		}
	}
	return true
}

// first returns the index of the first line of kind k, or -1.
func (c *cut) first(k lineKind) int {
	for i, kk := range c.kinds {
		if kk == k {
			return i
		}
	}
	return -1
}

// keep keeps the first n lines.
func (c *cut) keep(n int) {
	c.lines, c.kinds = c.lines[:n], c.kinds[:n]
}

// drop removes every line of kind k.
func (c *cut) drop(k lineKind) {
	var lines []string
	var kinds []lineKind
	for i, kk := range c.kinds {
		if kk != k {
			lines, kinds = append(lines, c.lines[i]), append(kinds, kk)
		}
	}
	c.lines, c.kinds = lines, kinds
}

// footers cuts at the first footer below the person's text (what follows a footer is earlier
// mail, even when nothing marks it so) and removes footers above any text.
func (c *cut) footers() {
	for i, k := range c.kinds {
		if k == kindFooter && len(nonBlank(c.kinds[:i])) > 0 {
			c.keep(i)
			break
		}
	}
	c.drop(kindFooter)
}

// bottomPosted handles a reply written below the earlier mail: the body opens with a marker,
// holds only markers, quotes and headers until its last run of text, and that run ends the body.
// The person's text is then that last run alone; it reports whether it cut so.
func (c *cut) bottomPosted() bool {
	start := c.lastTextRun()
	if start <= 0 {
		return false
	}
	lead := nonBlank(c.kinds[:start])
	if len(lead) == 0 || lead[0] != kindMarker {
		return false
	}
	for _, k := range lead {
		if k == kindText {
			return false
		}
	}
	c.lines, c.kinds = c.lines[start:], c.kinds[start:]
	return true
}

// lastTextRun returns where the body's final run of text and blank lines starts, or -1 when
// the body does not end with text.
func (c *cut) lastTextRun() int {
	i := len(c.kinds)
	for i > 0 && (c.kinds[i-1] == kindText || c.kinds[i-1] == kindBlank) {
		i--
	}
	for i < len(c.kinds) && c.kinds[i] == kindBlank {
		i++
	}
	if i == len(c.kinds) {
		return -1
	}
	return i
}

// nonBlank returns the kinds that are not blank.
func nonBlank(kinds []lineKind) []lineKind {
	var out []lineKind
	for _, k := range kinds {
		if k != kindBlank {
			out = append(out, k)
		}
	}
	return out
}

// textAboveMarker finds the first text line directly above a marker (blank lines aside) below
// which the earlier mail continues to the end (see below). It returns that text line's index,
// or -1. One pass from the end gathers what each marker needs, so a body of many markers costs
// linear time.
func (c *cut) textAboveMarker() int {
	below := c.mailBelow()
	for i, k := range c.kinds {
		if k != kindText {
			continue
		}
		m := i + 1
		for m < len(c.kinds) && c.kinds[m] == kindBlank {
			m++
		}
		if m < len(c.kinds) && c.kinds[m] == kindMarker && below[m] {
			return i
		}
	}
	return -1
}

// mailBelow reports, for each line, whether everything after it is earlier mail: no quote at
// all, or quotes (with markers, headers and blank lines) followed only by a few text lines,
// answers or a footnote inside the earlier mail rather than new text.
func (c *cut) mailBelow() []bool {
	n := len(c.kinds)
	out := make([]bool, n)
	tail := n // where the final run of text and blank lines starts
	for tail > 0 && (c.kinds[tail-1] == kindText || c.kinds[tail-1] == kindBlank) {
		tail--
	}
	quoted, texts, firstBreak := false, 0, n
	for i := n - 1; i >= 0; i-- {
		// quoted, texts and firstBreak describe the lines after i.
		out[i] = !quoted || firstBreak >= tail && texts <= maxTextAmidQuotes
		switch c.kinds[i] {
		case kindQuote:
			quoted = true
		case kindText:
			texts++
			firstBreak = i
		case kindRule, kindFooter:
			firstBreak = i
		}
	}
	return out
}

// textAboveQuotesToEnd finds the last text line above which the person wrote and below which
// only quotes, markers and blank lines run to the end; it returns its index, or -1.
func (c *cut) textAboveQuotesToEnd() int {
	i := len(c.kinds)
	for i > 0 && (c.kinds[i-1] == kindQuote || c.kinds[i-1] == kindMarker || c.kinds[i-1] == kindBlank) {
		i--
	}
	if i == len(c.kinds) || i == 0 || c.kinds[i-1] != kindText {
		return -1
	}
	for _, k := range c.kinds[i:] {
		if k != kindBlank {
			return i - 1
		}
	}
	return -1
}

// minHeaderBlock is how many header lines in a row end the person's text.
const minHeaderBlock = 3

// headerBlocks cuts above the first block of header lines below text, then removes stray header
// lines. A header value wrapped over text lines between two header lines belongs to the block.
func (c *cut) headerBlocks() {
	c.mergeWrappedHeaders()
	for i, k := range c.kinds {
		if k != kindText {
			continue
		}
		j := i + 1
		for j < len(c.kinds) && (c.kinds[j] == kindBlank || c.kinds[j] == kindQuote) {
			j++
		}
		n := 0
		for j+n < len(c.kinds) && c.kinds[j+n] == kindHeader {
			n++
		}
		if n >= minHeaderBlock {
			c.keep(i + 1)
			break
		}
	}
	c.drop(kindHeader)
}

// mergeWrappedHeaders marks as header the first stretch that runs from a header line over text
// and blank lines to a later header line followed by a blank line (a block whose values wrapped).
func (c *cut) mergeWrappedHeaders() {
	for i, k := range c.kinds {
		if k != kindHeader || i+1 >= len(c.kinds) || c.kinds[i+1] == kindHeader {
			continue
		}
		for j := i + 1; j+1 < len(c.kinds); j++ {
			if c.kinds[j] != kindHeader && c.kinds[j] != kindText && c.kinds[j] != kindBlank {
				break
			}
			if c.kinds[j] == kindHeader && c.kinds[j+1] == kindBlank {
				for x := i; x <= j; x++ {
					c.kinds[x] = kindHeader
				}
				return
			}
		}
	}
}

// trailingQuotes returns how many lines remain once quotes and blank lines at the end are cut.
func (c *cut) trailingQuotes() int {
	i := len(c.kinds)
	for i > 0 && (c.kinds[i-1] == kindQuote || c.kinds[i-1] == kindBlank) {
		i--
	}
	return i
}

// Earlier mail that some clients introduce without a closing "wrote:": a line led by a
// year-first date with a time or an address after it, or an "On <date>" line (in the
// languages attributions are written in) with a year and a time.
var (
	yearFirstDate = lazy(`^\d{4}[-/.]\d{1,2}[-/.]\d{1,2}\b.{0,150}(@|<|\d{1,2}:\d{2}\S*\s+\S*\pL)`)
	onDateAndTime = lazy(`^(on|am|le|el|em|op|il|den|på) .{0,60}\b(19|20)\d{2}\b.{0,30}\b\d{1,2}[:.]\d{2}\b.{0,100}$`)
)

// isLooseMarker reports whether l opens earlier mail without the usual attribution form. It
// is only a hint for the coarse pass: the second pass keeps the person's text if it disagrees.
func isLooseMarker(l string) bool {
	sq := squash(l)
	if len(sq) > maxAttributionLen {
		return false
	}
	return yearFirstDate.MatchString(sq) || onDateAndTime.MatchString(sq)
}

// maxMarkerSpan is how many lines a client may break an attribution over, blank lines and a
// "mailto:" line included.
const maxMarkerSpan = 6

// wroteBelow returns how many lines the loose marker at i spans: up to a line ending in
// "wrote:" close below it, or just its own line.
func wroteBelow(lines []string, i int) int {
	for n := 1; n <= maxMarkerSpan && i+n <= len(lines); n++ {
		sq := strings.TrimLeft(squash(lines[i+n-1]), "> ")
		if strings.HasSuffix(sq, "wrote:") || strings.HasSuffix(sq, "schrieb:") {
			return n
		}
	}
	return 1
}
