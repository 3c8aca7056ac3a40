package message

import (
	"net/mail"
	"net/textproto"
	"regexp"
	"strings"
	"time"

	"github.com/jhillyerd/enmime/v2"
)

// copyHeaders re-keys the header map with the standard library's canonical keys.
func copyHeaders(h textproto.MIMEHeader) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, vs := range h {
		key := textproto.CanonicalMIMEHeaderKey(k)
		for _, v := range vs {
			out[key] = append(out[key], strings.ToValidUTF8(v, "\uFFFD"))
		}
	}
	return out
}

// setHeaderFields fills the typed header fields. get returns a header with RFC 2047 words decoded.
func (m *Message) setHeaderFields(get func(string) string) {
	m.Subject = cleanLine(repairWords(get("Subject")))
	if from := m.addressList("From", m.rawHeader("From")); len(from) > 0 {
		m.From = from[0]
	}
	m.To = m.addressList("To", m.rawHeader("To"))
	m.Cc = m.addressList("Cc", m.rawHeader("Cc"))
	m.ReplyTo = m.addressList("Reply-To", m.rawHeader("Reply-To"))
	m.MessageID = firstID(get("Message-Id"))
	m.InReplyTo = firstID(get("In-Reply-To"))
	m.References = messageIDs(get("References"))
	m.Date = m.parseDate(get("Date"))
}

// rawHeader joins all values of a header field, for address fields split over repeated headers.
func (m *Message) rawHeader(name string) string {
	return strings.Join(m.Headers[textproto.CanonicalMIMEHeaderKey(name)], ", ")
}

// addressList parses an address header, falling back to scraping addresses out of it.
func (m *Message) addressList(field, raw string) []Address {
	if strings.TrimSpace(raw) == "" {
		return nil
	}
	list, err := enmime.ParseAddressList(raw)
	if err == nil {
		return convertAddresses(list)
	}
	m.addProblem("warning: " + field + " header: " + err.Error())
	return scrapeAddresses(raw)
}

// convertAddresses maps net/mail addresses onto Address, lowercasing the address.
func convertAddresses(list []*mail.Address) []Address {
	out := make([]Address, 0, len(list))
	for _, a := range list {
		if a == nil || a.Address == "" {
			continue
		}
		out = append(out, Address{Name: cleanLine(a.Name), Addr: cleanAddr(a.Address)})
	}
	return out
}

var addrLike = regexp.MustCompile(`[^\s<>()",;:]+@[^\s<>()",;:]+`)

// scrapeAddresses recovers anything address-shaped from a header that would not parse.
func scrapeAddresses(raw string) []Address {
	var out []Address
	for _, a := range addrLike.FindAllString(raw, -1) {
		out = append(out, Address{Addr: cleanAddr(a)})
	}
	return out
}

// cleanAddr lowercases an address and makes it valid UTF-8.
func cleanAddr(a string) string {
	return strings.ToLower(cleanLine(a))
}

var angleID = regexp.MustCompile(`<([^<>\s]+)>`)

// messageIDs returns the ids in a Message-ID, In-Reply-To or References value, without <>.
// Values without angle brackets (seen from broken clients) are split on whitespace and commas.
func messageIDs(v string) []string {
	var ids []string
	for _, m := range angleID.FindAllStringSubmatch(v, -1) {
		ids = append(ids, cleanLine(m[1]))
	}
	if len(ids) > 0 {
		return ids
	}
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		ids = append(ids, cleanLine(strings.Trim(f, "<>")))
	}
	return ids
}

// firstID returns the first message id in v, or "".
func firstID(v string) string {
	if ids := messageIDs(v); len(ids) > 0 {
		return ids[0]
	}
	return ""
}

// parseDate parses the Date header, recording a problem when it is present but unreadable.
func (m *Message) parseDate(v string) time.Time {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}
	}
	t, err := mail.ParseDate(v)
	if err != nil {
		m.addProblem("warning: Date header: cannot parse " + quoteShort(v))
		return time.Time{}
	}
	return t
}

// quoteShort quotes v for a problem message, cutting it to a readable length.
func quoteShort(v string) string {
	const limit = 80
	if r := []rune(cleanLine(v)); len(r) > limit {
		v = string(r[:limit]) + "…"
	}
	return `"` + v + `"`
}

// unpaddedWord matches a base64 encoded word, to repair the missing "=" padding some senders
// produce (=?utf-8?B?SGVsbG8gd29ybGQ?=), which the strict decoder leaves undecoded.
var unpaddedWord = regexp.MustCompile(`=\?([^?\s]+)\?[Bb]\?([A-Za-z0-9+/]+)\?=`)

// repairWords decodes encoded words that survived the first decoding pass because of bad padding.
func repairWords(v string) string {
	if !strings.Contains(v, "=?") {
		return v
	}
	padded := unpaddedWord.ReplaceAllStringFunc(v, func(w string) string {
		m := unpaddedWord.FindStringSubmatch(w)
		pad := strings.Repeat("=", (4-len(m[2])%4)%4)
		return "=?" + m[1] + "?B?" + m[2] + pad + "?="
	})
	return decodeWords(padded)
}
