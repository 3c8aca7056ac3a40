package auth

import (
	"context"
	"strings"

	"blitiri.com.ar/go/spf"
)

// checkSPF runs SPF for the client IP against the MAIL FROM domain, or the HELO name when MAIL
// FROM is empty (a bounce), as RFC 7208 section 2.4 says.
func checkSPF(ctx context.Context, r Resolver, env Envelope) SPFResult {
	res := spfIdentity(env)
	if env.RemoteIP == nil {
		res.Result, res.Error = "none", "no client IP address was given, so SPF was not checked"
		return res
	}
	res.IP = env.RemoteIP.String()
	if res.Domain == "" {
		res.Result, res.Error = "none", "neither MAIL FROM nor HELO gave a domain to check"
		return res
	}
	result, err := spf.CheckHostWithSender(env.RemoteIP, env.Helo, spfSender(env, res),
		spf.WithContext(ctx), spf.WithResolver(r))
	res.Result = string(result)
	if err != nil && result != spf.Pass {
		res.Error = err.Error()
	}
	return res
}

// spfIdentity says which domain SPF checks.
func spfIdentity(env Envelope) SPFResult {
	if d := domainOf(env.MailFrom); d != "" && strings.Contains(env.MailFrom, "@") {
		return SPFResult{Domain: d, Identity: "mailfrom"}
	}
	if d := normalizeDomain(env.Helo); d != "" {
		return SPFResult{Domain: d, Identity: "helo"}
	}
	return SPFResult{}
}

// spfSender is the sender for check_host: MAIL FROM, or postmaster@<helo> (RFC 7208 section 2.4).
func spfSender(env Envelope, id SPFResult) string {
	if id.Identity == "mailfrom" {
		return strings.Trim(strings.TrimSpace(env.MailFrom), "<>")
	}
	return "postmaster@" + id.Domain
}
