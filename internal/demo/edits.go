package demo

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// edit is one literal edit. apply makes it on the site (in memory) and says what it did, in
// the past tense, for the owner.
type edit interface {
	apply(s *site) (string, error)
}

var (
	_ edit = replaceEdit{}
	_ edit = titleEdit{}
	_ edit = headingEdit{}
	_ edit = colourEdit{}
	_ edit = paragraphEdit{}
	_ edit = pageEdit{}
)

// replaceEdit replaces old with new in file, or in every editable file when file is "".
type replaceEdit struct{ old, new, file string }

func (e replaceEdit) apply(s *site) (string, error) {
	files, err := e.files(s)
	if err != nil {
		return "", err
	}
	done, fold, err := e.replaceIn(s, files, false)
	if err == nil && len(done) == 0 {
		done, fold, err = e.replaceIn(s, files, true)
	}
	if err != nil || len(done) == 0 {
		return "", e.missing(err)
	}
	how := ""
	if fold {
		how = " (matched ignoring case)"
	}
	return fmt.Sprintf("replaced %s with %s in %s%s", quote(e.old), quote(e.new), strings.Join(done, ", "), how), nil
}

func (e replaceEdit) files(s *site) ([]string, error) {
	if e.file == "" {
		return s.textFiles()
	}
	name, err := s.check(e.file)
	if err != nil {
		return nil, err
	}
	if !editable(name) {
		return nil, fmt.Errorf("%s: the demo agent only edits %s files: %w", name, strings.Join(editableExts, ", "), ErrUnsafePath)
	}
	return []string{name}, nil
}

// replaceIn replaces in files and lists those changed, with their count of replacements.
func (e replaceEdit) replaceIn(s *site, files []string, fold bool) ([]string, bool, error) {
	var done []string
	for _, name := range files {
		text, err := s.read(name)
		if err != nil {
			return nil, fold, err
		}
		if next, n := e.replace(name, text, fold); n > 0 {
			s.write(name, next)
			done = append(done, fmt.Sprintf("%s (%s)", name, times(n)))
		}
	}
	return done, fold, nil
}

// replace replaces in one file: only in the text of HTML pages, where old may also be
// written with entities (&amp;) and new is escaped.
func (e replaceEdit) replace(name, text string, fold bool) (string, int) {
	if ext := strings.ToLower(path.Ext(name)); ext != ".html" && ext != ".htm" {
		return replaceAll(text, e.old, e.new, fold)
	}
	next, n := replaceText(text, e.old, escapeText(e.new), fold)
	if n == 0 && escapeText(e.old) != e.old {
		next, n = replaceText(text, escapeText(e.old), escapeText(e.new), fold)
	}
	return next, n
}

func (e replaceEdit) missing(err error) error {
	if err != nil {
		return err
	}
	where := "any .html, .md, .css or .txt file of the site"
	if e.file != "" {
		where = e.file
	}
	return notFound("did not find %s in %s (in pages, only text is replaced, not tags)", quote(e.old), where)
}

func times(n int) string {
	if n == 1 {
		return "1 place"
	}
	return fmt.Sprintf("%d places", n)
}

// titleEdit sets index.html's <title>, and its first <h1> when that showed the old title.
type titleEdit struct{ text string }

func (e titleEdit) apply(s *site) (string, error) {
	page, doc, err := s.home()
	if err != nil {
		return "", err
	}
	title, ok := findElement(doc, "title")
	if !ok {
		return "", notFound("%s has no <title>", page)
	}
	old := innerText(doc[title.open:title.close])
	doc = setContent(doc, title, escapeText(e.text))
	also := ""
	if h1, ok := findElement(doc, "h1"); ok && innerText(doc[h1.open:h1.close]) == old {
		doc = setContent(doc, h1, escapeText(e.text))
		also = " and its <h1> heading"
	}
	s.write(page, doc)
	return fmt.Sprintf("set the title of %s%s to %s", page, also, quote(e.text)), nil
}

// headingEdit sets the first <h1> of index.html.
type headingEdit struct{ text string }

func (e headingEdit) apply(s *site) (string, error) {
	page, doc, err := s.home()
	if err != nil {
		return "", err
	}
	h1, ok := findElement(doc, "h1")
	if !ok {
		return "", notFound("%s has no <h1> heading", page)
	}
	s.write(page, setContent(doc, h1, escapeText(e.text)))
	return fmt.Sprintf("set the <h1> heading of %s to %s", page, quote(e.text)), nil
}

// colourEdit sets a colour in the stylesheet of index.html.
type colourEdit struct {
	target target
	colour string
}

func (e colourEdit) apply(s *site) (string, error) {
	page, err := s.indexPage()
	if err != nil {
		return "", err
	}
	sheet, err := s.stylesheet(page)
	if err != nil {
		return "", err
	}
	css, err := s.read(sheet)
	if err != nil {
		return "", err
	}
	s.write(sheet, setColour(css, e.target, e.colour))
	return fmt.Sprintf("made %s %s in %s", e.target.label, e.colour, sheet), nil
}

// paragraphEdit adds a paragraph at the end of index.html's main content.
type paragraphEdit struct{ text string }

func (e paragraphEdit) apply(s *site) (string, error) {
	page, doc, err := s.home()
	if err != nil {
		return "", err
	}
	at, ok := contentEnd(doc)
	if !ok {
		return "", notFound("%s has no </main> or </body> to add a paragraph before", page)
	}
	s.write(page, insertChild(doc, at, "<p>"+escapeText(e.text)+"</p>"))
	return fmt.Sprintf("added a paragraph to %s: %s", page, quote(e.text)), nil
}

// pageEdit adds file, a page called name in index.html's layout, and links it from the
// navigation of index.html (and of every page that has the same navigation).
type pageEdit struct{ name, file string }

func (e pageEdit) apply(s *site) (string, error) {
	index, doc, err := s.home()
	if err != nil {
		return "", err
	}
	file := path.Join(path.Dir(index), e.file)
	if s.exists(file) {
		return "", fmt.Errorf("%s %w: choose another name, or replace text in it", file, ErrExists)
	}
	linked, err := e.link(s, index, doc)
	if err != nil {
		return "", err
	}
	home, _ := s.read(index)
	if err := s.create(file, e.page(home)); err != nil {
		return "", err
	}
	return fmt.Sprintf("added the page %s (%s), linked from %s", file, quote(e.name), strings.Join(linked, ", ")), nil
}

// link adds a link to the page in index's <nav>, and in the pages with the same <nav>; or,
// without a <nav>, in a paragraph at the end of index's content.
func (e pageEdit) link(s *site, index, doc string) ([]string, error) {
	nav, ok := findElement(doc, "nav")
	if !ok {
		at, ok := contentEnd(doc)
		if !ok {
			return nil, notFound("%s has no <nav>, </main> or </body> to link the page from", index)
		}
		s.write(index, insertChild(doc, at, "<p>"+e.anchor()+"</p>"))
		return []string{index}, nil
	}
	return e.linkNav(s, doc[nav.start:nav.end])
}

func (e pageEdit) linkNav(s *site, old string) ([]string, error) {
	next := e.navWithLink(old)
	files, err := s.textFiles()
	if err != nil {
		return nil, err
	}
	var linked []string
	for _, f := range files {
		if ext := path.Ext(f); ext != ".html" && ext != ".htm" {
			continue
		}
		if doc, err := s.read(f); err == nil && strings.Contains(doc, old) {
			s.write(f, strings.Replace(doc, old, next, 1))
			linked = append(linked, f)
		}
	}
	return linked, nil
}

// navWithLink adds the link at the end of a <nav> element, as a list item when it holds a
// list.
func (e pageEdit) navWithLink(nav string) string {
	if at, ok := lastClosing(nav, "ul"); ok {
		return insertChild(nav, at, "<li>"+e.anchor()+"</li>")
	}
	at, _ := lastClosing(nav, "nav")
	return insertChild(nav, at, e.anchor())
}

func (e pageEdit) anchor() string {
	return fmt.Sprintf(`<a href="%s">%s</a>`, e.file, escapeText(e.name))
}

// page is the new page: the home page with its title prefixed by the page's name and its main
// content replaced by a heading and a placeholder.
func (e pageEdit) page(home string) string {
	doc := home
	if title, ok := findElement(doc, "title"); ok {
		site := innerText(doc[title.open:title.close])
		doc = setContent(doc, title, escapeText(e.name+" – "+site))
	}
	main, ok := findElement(doc, "main")
	if !ok {
		main, ok = findElement(doc, "body")
	}
	if !ok {
		return "<!doctype html>\n<title>" + escapeText(e.name) + "</title>\n" + e.content("", "h1") + "\n"
	}
	tag := "h1"
	if hasH1.MatchString(doc[:main.open]) { // the layout's header has the site's <h1>
		tag = "h2"
	}
	indent := lineIndent(doc, main.start)
	return setContent(doc, main, "\n"+e.content(indent+"  ", tag)+"\n"+indent)
}

var hasH1 = regexp.MustCompile(`(?i)<h1\b`)

func (e pageEdit) content(indent, tag string) string {
	return indent + "<" + tag + ">" + escapeText(e.name) + "</" + tag + ">\n" +
		indent + "<p>This page is new; nothing has been written on it yet.</p>"
}

// lineIndent is the indentation of the line holding doc[at].
func lineIndent(doc string, at int) string {
	line := doc[strings.LastIndexByte(doc[:at], '\n')+1 : at]
	return line[:len(line)-len(strings.TrimLeft(line, " \t"))]
}

// home reads the site's index.html.
func (s *site) home() (string, string, error) {
	page, err := s.indexPage()
	if err != nil {
		return "", "", err
	}
	doc, err := s.read(page)
	return page, doc, err
}
