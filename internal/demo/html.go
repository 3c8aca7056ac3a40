package demo

import (
	"html"
	"regexp"
	"strings"
)

// The HTML helpers work on the text of a page with a few patterns, not a parser: they find
// the first element of a kind, the text between tags, and where to insert a child with the
// page's indentation. Enough for literal edits of hand-written pages.

// escapeText escapes text for HTML content (not attributes).
func escapeText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

var (
	tags       = regexp.MustCompile(`<[^>]*>`)
	whitespace = regexp.MustCompile(`\s+`)
)

// innerText is the text of an HTML fragment: tags removed, entities decoded, spaces collapsed.
func innerText(fragment string) string {
	text := html.UnescapeString(tags.ReplaceAllString(fragment, ""))
	return strings.TrimSpace(whitespace.ReplaceAllString(text, " "))
}

// element locates the first <tag …>…</tag> in doc: start of the opening tag, end of the
// opening tag (start of the content), start of the closing tag, end of the closing tag.
type element struct{ start, open, close, end int }

func findElement(doc, tag string) (element, bool) {
	o := regexp.MustCompile(`(?is)<` + tag + `(?:\s[^>]*)?>`).FindStringIndex(doc)
	if o == nil {
		return element{}, false
	}
	c := regexp.MustCompile(`(?i)</` + tag + `\s*>`).FindStringIndex(doc[o[1]:])
	if c == nil {
		return element{}, false
	}
	return element{start: o[0], open: o[1], close: o[1] + c[0], end: o[1] + c[1]}, true
}

// lastClosing finds the last </tag> of doc.
func lastClosing(doc, tag string) (int, bool) {
	all := regexp.MustCompile(`(?i)</`+tag+`\s*>`).FindAllStringIndex(doc, -1)
	if all == nil {
		return 0, false
	}
	return all[len(all)-1][0], true
}

// setContent replaces an element's content.
func setContent(doc string, el element, content string) string {
	return doc[:el.open] + content + doc[el.close:]
}

// insertChild inserts snippet before the closing tag at at, as the element's last child: on
// its own line, indented like the children before it, when the closing tag is on its own line.
func insertChild(doc string, at int, snippet string) string {
	lineStart := strings.LastIndexByte(doc[:at], '\n') + 1
	indent := doc[lineStart:at]
	if strings.TrimSpace(indent) != "" {
		return doc[:at] + snippet + doc[at:]
	}
	return doc[:lineStart] + childIndent(doc[:lineStart], indent) + snippet + "\n" + doc[lineStart:]
}

// childIndent is the indentation of the last non-empty line of before when it is deeper
// than the parent's, else the parent's plus two spaces.
func childIndent(before, parent string) string {
	trimmed := strings.TrimRight(before, " \t\r\n")
	last := trimmed[strings.LastIndexByte(trimmed, '\n')+1:]
	indent := last[:len(last)-len(strings.TrimLeft(last, " \t"))]
	if len(indent) > len(parent) {
		return indent
	}
	return parent + "  "
}

// contentEnd is where new content of a page goes: before the last </main>, else </body>.
func contentEnd(doc string) (int, bool) {
	if at, ok := lastClosing(doc, "main"); ok {
		return at, true
	}
	return lastClosing(doc, "body")
}

// textRanges returns the byte ranges of doc that are text: outside tags, comments,
// declarations, and the content of <script> and <style>.
func textRanges(doc string) [][2]int {
	var out [][2]int
	start := 0
	for i := 0; i < len(doc); {
		if doc[i] != '<' || !startsMarkup(doc[i:]) {
			i++
			continue
		}
		if i > start {
			out = append(out, [2]int{start, i})
		}
		i = markupEnd(doc, i)
		start = i
	}
	if start < len(doc) {
		out = append(out, [2]int{start, len(doc)})
	}
	return out
}

func startsMarkup(s string) bool {
	if len(s) < 2 {
		return false
	}
	c := s[1]
	return c == '/' || c == '!' || c == '?' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

var rawText = regexp.MustCompile(`(?i)^<(script|style)\b`)

// markupEnd returns the end of the markup starting at i: a comment, a tag (quotes in
// attributes honoured), or a whole <script> or <style> element.
func markupEnd(doc string, i int) int {
	if strings.HasPrefix(doc[i:], "<!--") {
		return endAfter(doc, i+4, "-->")
	}
	end := tagEnd(doc, i)
	if m := rawText.FindStringSubmatch(doc[i:]); m != nil {
		if c := regexp.MustCompile(`(?i)</` + m[1] + `\s*>`).FindStringIndex(doc[end:]); c != nil {
			return end + c[1]
		}
		return len(doc)
	}
	return end
}

func endAfter(doc string, from int, marker string) int {
	if j := strings.Index(doc[from:], marker); j >= 0 {
		return from + j + len(marker)
	}
	return len(doc)
}

func tagEnd(doc string, i int) int {
	var q byte
	for j := i + 1; j < len(doc); j++ {
		switch c := doc[j]; {
		case q != 0:
			if c == q {
				q = 0
			}
		case c == '"' || c == '\'':
			q = c
		case c == '>':
			return j + 1
		}
	}
	return len(doc)
}

// replaceText replaces old with repl in the text of an HTML page (never in markup), and
// returns the new page and the number of replacements. fold matches ignoring case.
func replaceText(doc, old, repl string, fold bool) (string, int) {
	re := literal(old, fold)
	var b strings.Builder
	n, last := 0, 0
	for _, r := range textRanges(doc) {
		b.WriteString(doc[last:r[0]])
		seg := doc[r[0]:r[1]]
		n += len(re.FindAllStringIndex(seg, -1))
		b.WriteString(re.ReplaceAllLiteralString(seg, repl))
		last = r[1]
	}
	b.WriteString(doc[last:])
	return b.String(), n
}

// replaceAll replaces old with repl in a plain text file.
func replaceAll(text, old, repl string, fold bool) (string, int) {
	re := literal(old, fold)
	return re.ReplaceAllLiteralString(text, repl), len(re.FindAllStringIndex(text, -1))
}

func literal(s string, fold bool) *regexp.Regexp {
	if fold {
		return regexp.MustCompile(`(?i)` + regexp.QuoteMeta(s))
	}
	return regexp.MustCompile(regexp.QuoteMeta(s))
}
