package auth

import (
	"bytes"
	"net/mail"
	"strings"

	"golang.org/x/net/idna"
)

// message is the part of the raw message the checks need.
type message struct {
	raw        []byte // CRLF line endings, as DKIM hashes them
	header     mail.Header
	from       string // the one From address
	fromDomain string // its domain, lowercase A-labels
}

func parseMessage(raw []byte) (*message, error) {
	raw = toCRLF(raw)
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return nil, failWith(ErrFrom, "the message header cannot be parsed (%v), so its sender cannot be identified", err)
	}
	from, err := singleFrom(m.Header)
	if err != nil {
		return nil, err
	}
	domain, err := addressDomain(from)
	if err != nil {
		return nil, err
	}
	return &message{raw: raw, header: m.Header, from: from, fromDomain: domain}, nil
}

// singleFrom returns the only address of the only From header field.
func singleFrom(h mail.Header) (string, error) {
	fields := h["From"]
	switch {
	case len(fields) == 0:
		return "", failWith(ErrFrom, "the message has no From header, so its sender cannot be identified")
	case len(fields) > 1:
		return "", failWith(ErrFrom, "the message has %d From headers; a genuine message has exactly one, so it may be spoofed", len(fields))
	}
	list, err := mail.ParseAddressList(fields[0])
	if err != nil {
		return "", failWith(ErrFrom, "the From header %q cannot be parsed (%v), so its sender cannot be identified", fields[0], err)
	}
	if len(list) != 1 {
		return "", failWith(ErrFrom, "the From header %q has %d addresses; only messages with a single sender are accepted", fields[0], len(list))
	}
	return list[0].Address, nil
}

// addressDomain returns the normalized domain of an address.
func addressDomain(addr string) (string, error) {
	at := strings.LastIndexByte(addr, '@')
	if at < 0 || at == len(addr)-1 {
		return "", failWith(ErrFrom, "the From address %q has no domain, so its sender cannot be identified", addr)
	}
	domain, err := idna.Lookup.ToASCII(normalizeDomain(addr[at+1:]))
	if err != nil || domain == "" {
		return "", failWith(ErrFrom, "the From address %q has an invalid domain (%v)", addr, err)
	}
	return domain, nil
}

func normalizeDomain(d string) string {
	return strings.ToLower(strings.TrimSuffix(strings.TrimSpace(d), "."))
}

// domainOf is the normalized domain after the last @, or s itself when it has none.
func domainOf(s string) string {
	s = strings.Trim(strings.TrimSpace(s), "<>")
	if at := strings.LastIndexByte(s, '@'); at >= 0 {
		s = s[at+1:]
	}
	return normalizeDomain(s)
}

// toCRLF turns bare LF line endings (a message saved to a Unix file) into the CRLF the message had
// on the wire; DKIM body hashes are computed over CRLF.
func toCRLF(raw []byte) []byte {
	if !hasBareLF(raw) {
		return raw
	}
	out := make([]byte, 0, len(raw)+bytes.Count(raw, []byte("\n")))
	for i, b := range raw {
		if b == '\n' && (i == 0 || raw[i-1] != '\r') {
			out = append(out, '\r')
		}
		out = append(out, b)
	}
	return out
}

func hasBareLF(raw []byte) bool {
	for i, b := range raw {
		if b == '\n' && (i == 0 || raw[i-1] != '\r') {
			return true
		}
	}
	return false
}
