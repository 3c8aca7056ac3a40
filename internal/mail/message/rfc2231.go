package message

import (
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/jhillyerd/enmime/v2"
	"golang.org/x/text/encoding/htmlindex"
)

// rfc2231Param matches one extended parameter: name*=…, name*0=…, name*0*=…
var rfc2231Param = regexp.MustCompile(`(?i)(?:^|;)\s*(filename|name)\*(\d*)(\*?)\s*=\s*("[^"]*"|[^;]*)`)

// rfc2231Name decodes an RFC 2231 file name that the standard library refused, typically because
// its charset is not UTF-8 (filename*=iso-8859-1'fr'caf%E9.pdf). Content-Disposition wins over
// Content-Type. It returns "" when there is no such parameter.
func rfc2231Name(p *enmime.Part) string {
	for _, h := range []string{"Content-Disposition", "Content-Type"} {
		for _, param := range []string{"filename", "name"} {
			if name := decode2231(p.Header.Get(h), param); strings.TrimSpace(name) != "" {
				return name
			}
		}
	}
	return ""
}

// segment is one piece of a (possibly continued) RFC 2231 parameter.
type segment struct {
	index    int
	encoded  bool
	rawValue string
}

// decode2231 reassembles and decodes the extended parameter param of a header value.
func decode2231(header, param string) string {
	segs := segments2231(header, param)
	if len(segs) == 0 {
		return ""
	}
	charset := ""
	var b strings.Builder
	for i, s := range segs {
		v := s.rawValue
		if i == 0 && s.encoded {
			charset, v = splitCharset(v)
		}
		if s.encoded {
			v = percentDecode(v)
		}
		b.WriteString(v)
	}
	return toUTF8(charset, b.String())
}

// segments2231 collects the extended segments of param in index order.
func segments2231(header, param string) []segment {
	var segs []segment
	for _, m := range rfc2231Param.FindAllStringSubmatch(header, -1) {
		if !strings.EqualFold(m[1], param) {
			continue
		}
		idx, _ := strconv.Atoi(m[2]) // "" (no continuation) is index 0
		encoded := m[3] == "*" || m[2] == ""
		segs = append(segs, segment{idx, encoded, strings.Trim(strings.TrimSpace(m[4]), `"`)})
	}
	sort.SliceStable(segs, func(i, j int) bool { return segs[i].index < segs[j].index })
	return segs
}

// splitCharset splits "charset'lang'value" into charset and value.
func splitCharset(v string) (string, string) {
	parts := strings.SplitN(v, "'", 3)
	if len(parts) != 3 {
		return "", v
	}
	return parts[0], parts[2]
}

// percentDecode undoes %XX escapes, keeping the input when it is not valid escaping.
func percentDecode(v string) string {
	d, err := url.PathUnescape(v)
	if err != nil {
		return v
	}
	return d
}

// toUTF8 converts s from charset to UTF-8; unknown charsets pass through unchanged.
func toUTF8(charset, s string) string {
	if charset == "" || strings.EqualFold(charset, "utf-8") || strings.EqualFold(charset, "us-ascii") {
		return s
	}
	enc, err := htmlindex.Get(charset)
	if err != nil {
		return s
	}
	out, err := enc.NewDecoder().String(s)
	if err != nil {
		return s
	}
	return out
}
