package message

import (
	"strings"

	"github.com/inbucket/html2text"
	"github.com/jhillyerd/enmime/v2"
)

// bodyText picks the readable text body: the plain part(s) if any, else the HTML as text.
func bodyText(env *enmime.Envelope) string {
	text := env.Text
	switch {
	case strings.HasPrefix(env.Root.ContentType, "multipart/"):
		text = strings.Join(plainParts(env.Root), "\n\n")
	case text == "" && env.HTML == "" && isBodyPart(env.Root, "text/plain"):
		text = string(env.Root.Content) // unparseable Content-Type: enmime filed the body as a file
	}
	if strings.TrimSpace(text) == "" && env.HTML != "" {
		text = htmlToText(env.HTML)
	}
	return cleanText(text)
}

// plainParts returns the text/plain body parts under p in reading order. Inside a
// multipart/alternative only the first alternative that has plain text counts.
func plainParts(p *enmime.Part) []string {
	switch {
	case p.ContentType == "multipart/alternative":
		return firstPlainAlternative(p)
	case strings.HasPrefix(p.ContentType, "multipart/"):
		var out []string
		for c := p.FirstChild; c != nil; c = c.NextSibling {
			out = append(out, plainParts(c)...)
		}
		return out
	case isBodyPart(p, "text/plain"):
		return []string{string(p.Content)}
	}
	return nil
}

// firstPlainAlternative returns the plain text of the first alternative that has any.
func firstPlainAlternative(p *enmime.Part) []string {
	for c := p.FirstChild; c != nil; c = c.NextSibling {
		if out := plainParts(c); len(out) > 0 {
			return out
		}
	}
	return nil
}

// isBodyPart reports whether p is a displayed body part of the given type rather than a file:
// not an attachment and without a file name.
func isBodyPart(p *enmime.Part, ctype string) bool {
	typ := p.ContentType
	if typ == "" {
		typ = "text/plain" // RFC 2045 default for a part without Content-Type
	}
	return typ == ctype && p.Disposition != "attachment" && strings.TrimSpace(p.FileName) == ""
}

// htmlToText converts HTML to readable text; a conversion failure yields "".
func htmlToText(html string) string {
	text, err := html2text.FromString(html)
	if err != nil {
		return ""
	}
	return text
}

// cleanText normalizes line endings and replaces invalid UTF-8.
func cleanText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.ToValidUTF8(s, "\uFFFD")
}

// cleanLine makes a header value a single trimmed line of valid UTF-8.
func cleanLine(s string) string {
	s = strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
	return strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
}
