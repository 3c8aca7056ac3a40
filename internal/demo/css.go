package demo

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// target is what a colour edit colours: a CSS selector and the properties that hold its
// colour (the first is added when none is there).
type target struct {
	label    string
	selector string
	props    []string
}

var targets = map[string]target{
	"header":     {label: "the header (h1)", selector: "h1", props: []string{"color"}},
	"background": {label: "the page background", selector: "body", props: []string{"background-color", "background"}},
	"text":       {label: "the text", selector: "body", props: []string{"color"}},
}

// targetFor maps the words of a colour edit onto a target.
func targetFor(words string) target {
	w := strings.ToLower(words)
	switch {
	case strings.Contains(w, "background"):
		return targets["background"]
	case strings.Contains(w, "text"):
		return targets["text"]
	}
	return targets["header"]
}

var hexColour = regexp.MustCompile(`^#(?:[0-9a-f]{3,4}|[0-9a-f]{6}|[0-9a-f]{8})$`)

// parseColour reads a CSS colour name ("light blue" is lightblue) or hex code, with an
// article or a trailing "colour" tolerated, and returns it as CSS.
func parseColour(s string) (string, bool) {
	s = strings.ToLower(unquote(s))
	s = strings.TrimPrefix(strings.TrimPrefix(s, "a "), "an ")
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(s, " colour"), " color"))
	if hexColour.MatchString(s) {
		return s, true
	}
	name := strings.NewReplacer(" ", "", "-", "").Replace(s)
	return name, colourNames[name]
}

// rule is a CSS rule's body: from after "{" to before "}".
type rule struct{ start, end int }

// findRule returns the last top-level rule of css whose selector list has selector.
func findRule(css, selector string) (rule, bool) {
	var found rule
	ok := false
	depth, segStart, bodyStart := 0, 0, 0
	for i := 0; i < len(css); i++ {
		switch css[i] {
		case '/':
			if strings.HasPrefix(css[i:], "/*") {
				i = endAfter(css, i+2, "*/") - 1
			}
		case '{':
			if depth == 0 {
				bodyStart = i + 1
			}
			depth++
		case '}':
			depth--
			if depth == 0 {
				if hasSelector(css[segStart:bodyStart-1], selector) {
					found, ok = rule{start: bodyStart, end: i}, true
				}
				segStart = i + 1
			}
		case ';':
			if depth == 0 {
				segStart = i + 1
			}
		}
	}
	return found, ok
}

var cssComment = regexp.MustCompile(`(?s)/\*.*?\*/`)

func hasSelector(list, selector string) bool {
	for _, s := range strings.Split(cssComment.ReplaceAllString(list, ""), ",") {
		if strings.EqualFold(strings.Join(strings.Fields(s), " "), selector) {
			return true
		}
	}
	return false
}

// setColour sets t's colour in css: in the last declaration of one of t's properties that
// holds a plain colour, else in a new declaration, else in a new rule at the end.
func setColour(css string, t target, colour string) string {
	r, ok := findRule(css, t.selector)
	if !ok {
		return strings.TrimRight(css, "\n") + fmt.Sprintf("\n\n%s {\n  %s: %s;\n}\n", t.selector, t.props[0], colour)
	}
	body := css[r.start:r.end]
	for _, p := range t.props {
		if nb, ok := setDeclaration(body, p, colour); ok {
			return css[:r.start] + nb + css[r.end:]
		}
	}
	return css[:r.start] + addDeclaration(body, t.props[0], colour) + css[r.end:]
}

// setDeclaration replaces the value of the last declaration of prop in a rule body, when
// that value is a plain colour (not an image or gradient).
func setDeclaration(body, prop, value string) (string, bool) {
	re := regexp.MustCompile(`(?i)(^|[;{\s])(` + regexp.QuoteMeta(prop) + `\s*:\s*)([^;}]*?)(\s*(?:;|$))`)
	all := re.FindAllStringSubmatchIndex(body, -1)
	if all == nil {
		return body, false
	}
	m := all[len(all)-1]
	old := strings.ToLower(body[m[6]:m[7]])
	if strings.Contains(old, "url(") || strings.Contains(old, "gradient(") {
		return body, false
	}
	return body[:m[6]] + value + body[m[7]:], true
}

// addDeclaration appends "prop: value;" to a rule body, on its own line when the body has
// one declaration a line.
func addDeclaration(body, prop, value string) string {
	trimmed := strings.TrimRight(body, " \t\r\n")
	if trimmed != "" && !strings.HasSuffix(trimmed, ";") && !strings.HasSuffix(trimmed, "{") {
		trimmed += ";"
	}
	if !strings.Contains(body, "\n") {
		return trimmed + " " + prop + ": " + value + "; "
	}
	indent := childIndent(trimmed+"\n", "")
	if strings.TrimSpace(trimmed) == "" {
		indent = "  "
	}
	return trimmed + "\n" + indent + prop + ": " + value + ";\n"
}

var (
	stylesheetLink = regexp.MustCompile(`(?is)<link\b[^>]*>`)
	relStylesheet  = regexp.MustCompile(`(?i)\brel\s*=\s*["']?stylesheet\b`)
	hrefAttr       = regexp.MustCompile(`(?i)\bhref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))`)
)

// stylesheet returns the path of the site's stylesheet: the first local stylesheet the page
// links to; else style.css next to the page, linked from its <head> by this edit.
func (s *site) stylesheet(page string) (string, error) {
	doc, err := s.read(page)
	if err != nil {
		return "", err
	}
	for _, link := range stylesheetLink.FindAllString(doc, -1) {
		if name, ok := localHref(page, link); ok && relStylesheet.MatchString(link) && s.exists(name) {
			return name, nil
		}
	}
	return s.linkStylesheet(page, doc)
}

// localHref resolves a link's href against page, when it names a file of the site.
func localHref(page, link string) (string, bool) {
	m := hrefAttr.FindStringSubmatch(link)
	if m == nil {
		return "", false
	}
	href := m[1] + m[2] + m[3]
	href, _, _ = strings.Cut(href, "?")
	href, _, _ = strings.Cut(href, "#")
	if href == "" || strings.Contains(href, ":") || strings.HasPrefix(href, "//") {
		return "", false
	}
	if strings.HasPrefix(href, "/") {
		return path.Clean(strings.TrimPrefix(href, "/")), true
	}
	return path.Join(path.Dir(page), href), true
}

// linkStylesheet adds style.css next to page (unless it is there) and links it.
func (s *site) linkStylesheet(page, doc string) (string, error) {
	at, ok := lastClosing(doc, "head")
	if !ok {
		return "", notFound("%s has no stylesheet and no <head> to link one from", page)
	}
	name := path.Join(path.Dir(page), "style.css")
	if _, err := s.read(name); err != nil {
		if err := s.create(name, "/* Styles added by the demo agent. */\n"); err != nil {
			return "", err
		}
	}
	s.write(page, insertChild(doc, at, `<link rel="stylesheet" href="style.css">`))
	return name, nil
}

// colourNames are the CSS named colours.
var colourNames = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range strings.Fields(namedColours) {
		m[n] = true
	}
	return m
}()

const namedColours = `aliceblue antiquewhite aqua aquamarine azure beige bisque black blanchedalmond blue
blueviolet brown burlywood cadetblue chartreuse chocolate coral cornflowerblue cornsilk crimson
cyan darkblue darkcyan darkgoldenrod darkgray darkgreen darkgrey darkkhaki darkmagenta
darkolivegreen darkorange darkorchid darkred darksalmon darkseagreen darkslateblue darkslategray
darkslategrey darkturquoise darkviolet deeppink deepskyblue dimgray dimgrey dodgerblue firebrick
floralwhite forestgreen fuchsia gainsboro ghostwhite gold goldenrod gray green greenyellow grey
honeydew hotpink indianred indigo ivory khaki lavender lavenderblush lawngreen lemonchiffon
lightblue lightcoral lightcyan lightgoldenrodyellow lightgray lightgreen lightgrey lightpink
lightsalmon lightseagreen lightskyblue lightslategray lightslategrey lightsteelblue lightyellow
lime limegreen linen magenta maroon mediumaquamarine mediumblue mediumorchid mediumpurple
mediumseagreen mediumslateblue mediumspringgreen mediumturquoise mediumvioletred midnightblue
mintcream mistyrose moccasin navajowhite navy oldlace olive olivedrab orange orangered orchid
palegoldenrod palegreen paleturquoise palevioletred papayawhip peachpuff peru pink plum
powderblue purple rebeccapurple red rosybrown royalblue saddlebrown salmon sandybrown seagreen
seashell sienna silver skyblue slateblue slategray slategrey snow springgreen steelblue tan teal
thistle tomato turquoise violet wheat white whitesmoke yellow yellowgreen`
