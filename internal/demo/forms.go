package demo

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// quotedValue is a value in quotes; value is a quoted value or the shortest text.
const (
	quotedValue = `"[^"]*"|“[^”]*”|‘[^’]*’|'[^']*'|«[^»]*»|` + "`[^`]*`"
	value       = `(?:` + quotedValue + `|.+?)`
	heading     = `(?:main\s+|page\s+|top\s+|big\s+)?(?:heading|header|headline|h1)`
	colourOf    = `(header|heading|headline|h1|title|page\s+background|site\s+background|background|page\s+text|body\s+text|text)(?:['’]s)?(?:\s+text)?`
)

// form is one sentence pattern of the edit language. build turns the pattern's groups into
// an edit, or says why the sentence is not a valid edit.
type form struct {
	re    *regexp.Regexp
	build func(groups []string, end string) (edit, string)
}

func newForm(pattern string, build func([]string, string) (edit, string)) form {
	return form{re: regexp.MustCompile(`(?i)^` + pattern + `$`), build: build}
}

// forms are tried in order: the first that matches decides.
var forms = []form{
	newForm(`(?:replace|swap)\s+(?:the\s+(?:text|words?|phrase)\s+)?(`+value+`)\s+(?:with|by|for)\s+(.+)`, buildReplace),
	newForm(`change\s+(`+quotedValue+`)\s+(?:to|into)\s+(.+)`, buildReplace),
	newForm(`(?:set|change|update)\s+(?:the\s+)?(?:page\s+|site\s+|website\s+)?title\s+(?:to|as|into)\s+(.+)`, buildTitle),
	newForm(`make\s+the\s+(?:page\s+|site\s+|website\s+)?title\s+(?:say|read|be)\s+(.+)`, buildTitle),
	newForm(`(?:set|change|update)\s+(?:the\s+)?`+heading+`(?:\s+text)?\s+(?:to|as|into)\s+(.+)`, buildHeading),
	newForm(`make\s+the\s+`+heading+`\s+(?:say|read)\s+(.+)`, buildHeading),
	newForm(`(?:make|turn|colou?r|paint)\s+(?:the\s+)?`+colourOf+`(?:\s+colou?r)?\s+(?:to\s+|into\s+)?(.+)`, buildColour),
	newForm(`(?:set|change|update)\s+(?:the\s+)?`+colourOf+`\s+colou?r\s+(?:to|as|into)\s+(.+)`, buildColour),
	newForm(`(?:set|change|update)\s+(?:the\s+)?(page\s+background|site\s+background|background)\s+(?:to|as|into)\s+(.+)`, buildColour),
	newForm(`(?:add|append|insert|put)\s+(?:a\s+|an\s+|another\s+|one\s+more\s+)?(?:new\s+|short\s+)?(?:paragraph|line|sentence)\s*(?:(?:saying|that\s+says|which\s+says|reading|that\s+reads|with\s+the\s+text|with\s+text|with)\s*:?|:)\s*(.+)`, buildParagraph),
	newForm(`(?:add|create|make)\s+(?:a|an|another)\s+(?:new\s+)?page\s+(?:called|named|titled|for)\s+(.+)`, buildPage),
	newForm(`(?:add|create|make)\s+(?:a|an|another)\s+(?:new\s+)?(.+?)\s+page`, buildPage),
}

// match finds the edit a cleaned clause asks for: nil when no form matches, or why the
// matching form refused it.
func match(text, end string) (edit, string) {
	for _, f := range forms {
		if m := f.re.FindStringSubmatch(text); m != nil {
			return f.build(m[1:], end)
		}
	}
	return nil, ""
}

// fileSuffix splits "NEW in FILE" when FILE looks like a file name.
var fileSuffix = regexp.MustCompile(`(?i)^(.+?)\s+(?:in|on)\s+(?:the\s+)?(?:file\s+|page\s+)?(\S+)$`)

func buildReplace(g []string, _ string) (edit, string) {
	e := replaceEdit{old: unquote(g[0]), new: g[1]}
	if m := fileSuffix.FindStringSubmatch(g[1]); m != nil && looksLikeFile(unquote(m[2])) {
		e.new, e.file = m[1], unquote(m[2])
	}
	e.new = unquote(e.new)
	if e.old == "" {
		return nil, "nothing to replace"
	}
	return e, ""
}

// looksLikeFile is true for a name with a path separator or an editable extension.
func looksLikeFile(name string) bool {
	return strings.ContainsAny(name, `/\`) || editable(name)
}

func buildTitle(g []string, _ string) (edit, string) {
	text := unquote(g[0])
	if text == "" {
		return nil, "the title cannot be empty"
	}
	return titleEdit{text: text}, ""
}

// buildHeading sets the heading's text; an unquoted colour ("change the header to green")
// sets its colour instead.
func buildHeading(g []string, _ string) (edit, string) {
	if c, ok := parseColour(g[0]); ok && !isQuoted(g[0]) {
		return colourEdit{target: targets["header"], colour: c}, ""
	}
	text := unquote(g[0])
	if text == "" {
		return nil, "the heading cannot be empty"
	}
	return headingEdit{text: text}, ""
}

func buildColour(g []string, _ string) (edit, string) {
	c, ok := parseColour(g[1])
	if !ok {
		return nil, quote(unquote(g[1])) + " is not a colour: use a CSS colour name such as green or a hex code such as #2e7d32"
	}
	return colourEdit{target: targetFor(g[0]), colour: c}, ""
}

// buildParagraph keeps the sentence's final punctuation unless the text was quoted.
func buildParagraph(g []string, end string) (edit, string) {
	text := unquote(g[0])
	if !isQuoted(g[0]) {
		text += end
	}
	if strings.TrimSpace(text) == "" {
		return nil, "the paragraph cannot be empty"
	}
	return paragraphEdit{text: text}, ""
}

// notPageNames are words that "add a new … page" may put where the name goes.
var notPageNames = map[string]bool{"new": true, "web": true, "blank": true, "empty": true, "html": true}

func buildPage(g []string, _ string) (edit, string) {
	name := strings.TrimSpace(unquote(g[0]))
	name = strings.TrimSuffix(strings.TrimSuffix(name, ".html"), ".htm")
	slug := slugify(name)
	if slug == "" || notPageNames[strings.ToLower(name)] {
		return nil, "say what the page is called, e.g. add a page called Contact"
	}
	return pageEdit{name: displayName(name), file: slug + ".html"}, ""
}

// slugify makes a file name from a page name: letters and digits, lower case, other runs as
// one dash ("Contact Us" → "contact-us", "Über uns" → "über-uns").
func slugify(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			dash = true
			continue
		}
		if dash && b.Len() > 0 {
			b.WriteByte('-')
		}
		b.WriteRune(r)
		dash = false
	}
	return b.String()
}

// displayName capitalizes a page name written all in lower case: "contact us" → "Contact us".
func displayName(name string) string {
	if name == "" || name != strings.ToLower(name) {
		return name
	}
	r, n := utf8.DecodeRuneInString(name)
	return string(unicode.ToUpper(r)) + name[n:]
}
