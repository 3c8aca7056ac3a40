package auth

import "golang.org/x/net/publicsuffix"

// alignment is a DMARC identifier alignment mode (RFC 7489 section 3.1).
type alignment string

const (
	relaxed alignment = "relaxed" // same organizational domain
	strict  alignment = "strict"  // same domain
)

// aligned reports whether an authenticated domain is aligned with the From domain.
func aligned(authDomain, fromDomain string, mode alignment) bool {
	authDomain, fromDomain = normalizeDomain(authDomain), normalizeDomain(fromDomain)
	if authDomain == "" || fromDomain == "" {
		return false
	}
	if mode == strict {
		return authDomain == fromDomain
	}
	return orgDomain(authDomain) == orgDomain(fromDomain)
}

// orgDomain is the organizational domain: the public suffix plus one label (mail.example.co.uk →
// example.co.uk). A domain that is itself a public suffix is its own organizational domain.
func orgDomain(domain string) string {
	org, err := publicsuffix.EffectiveTLDPlusOne(domain)
	if err != nil {
		return domain
	}
	return org
}
