package auth

import "strings"

// fromAuthResults takes the evidence from the trusted relay's Authentication-Results header.
// Headers with any other authserv-id are ignored, and of the relay's own only the topmost
// counts: relays prepend, so anything below was in the message before it reached the relay and
// may have been written by the sender — a "dkim=pass" below a relay header that reports no DKIM
// result (a relay that only checks SPF) must not fill the gap.
func fromAuthResults(servID string, msg *message, env Envelope) evidence {
	ev := newEvidence(msg, "authentication-results:"+servID)
	ev.relay = servID
	trusted := trustedHeaders(msg.header["Authentication-Results"], servID)
	if len(trusted) == 0 {
		ev.noRelayHeader = true
		return ev
	}
	top := trusted[0]
	ev.verdict.DKIM = relayDKIM(top)
	ev.verdict.SPF = relaySPF(top, env)
	ev.relayDMARC, ev.hasRelayDMARC = first(top, "dmarc")
	ev.dmarc.found = ev.hasRelayDMARC && ev.relayDMARC.result != "none"
	return ev
}

// trustedHeaders returns, top to bottom, the parsed header fields written by servID.
func trustedHeaders(values []string, servID string) []authResults {
	var trusted []authResults
	for _, v := range values {
		ar, ok := parseAuthResults(v)
		if ok && strings.EqualFold(ar.servID, servID) {
			trusted = append(trusted, ar)
		}
	}
	return trusted
}

func relayDKIM(h authResults) []DKIMResult {
	results := []DKIMResult{}
	for _, ri := range h.results {
		if ri.method == "dkim" {
			results = append(results, relayDKIMResult(ri))
		}
	}
	return results
}

func relayDKIMResult(ri resInfo) DKIMResult {
	res := DKIMResult{
		Domain:    normalizeDomain(firstNonEmpty(ri.props["header.d"], domainOf(ri.props["header.i"]))),
		Selector:  ri.props["header.s"],
		Algorithm: ri.props["header.a"],
		Result:    ri.result,
	}
	if res.Result != "pass" {
		res.Error = ri.props["reason"]
	}
	return res
}

// relaySPF reads the relay's spf result. The checked domain is smtp.mailfrom, or Amazon SES's
// "envelope-from" clause in the same header, or smtp.helo.
func relaySPF(h authResults, env Envelope) SPFResult {
	ri, ok := first(h, "spf")
	if !ok {
		return SPFResult{Result: "none", Error: "the trusted relay reported no SPF result"}
	}
	res := SPFResult{Result: ri.result, IP: ri.props["client-ip"]}
	if res.IP == "" && env.RemoteIP != nil {
		res.IP = env.RemoteIP.String()
	}
	res.Domain, res.Identity = relaySPFIdentity(h, ri)
	if res.Result != "pass" {
		res.Error = ri.props["reason"]
	}
	return res
}

func relaySPFIdentity(h authResults, ri resInfo) (domain, identity string) {
	if mf := ri.props["smtp.mailfrom"]; mf != "" {
		return domainOf(mf), "mailfrom"
	}
	if ef, ok := first(h, "envelope-from"); ok && ef.result != "" {
		return domainOf(ef.result), "mailfrom"
	}
	if helo := ri.props["smtp.helo"]; helo != "" {
		return normalizeDomain(helo), "helo"
	}
	return "", ""
}

// first returns the first result of method in h.
func first(h authResults, method string) (resInfo, bool) {
	for _, ri := range h.results {
		if ri.method == method {
			return ri, true
		}
	}
	return resInfo{}, false
}
