package auth

import (
	"fmt"
	"strings"
)

// The sentences in Verdict.Reason. Each names the From domain, what was found, and (for failures)
// what follows, e.g. "no DKIM signature from example.com and SPF softfail for 203.0.113.9: the
// message may be spoofed".

func passReason(ev evidence) string {
	v := ev.verdict
	if d := dkimAlignedPass(v); d != nil {
		return fmt.Sprintf("%sDKIM signature from %s passed and is aligned with the From domain %s",
			relayPrefix(ev), signer(*d), v.FromDomain)
	}
	return fmt.Sprintf("%s%s, aligned with the From domain %s", relayPrefix(ev), spfPhrase(v.SPF), v.FromDomain)
}

func failReason(policy Policy, ev evidence) string {
	v := ev.verdict
	if policy == RequireDKIM {
		return fmt.Sprintf("%s%s, and this project requires DKIM (%s does not count): the message may be spoofed",
			relayPrefix(ev), dkimSummary(v), spfSummary(v))
	}
	return fmt.Sprintf("%s%s and %s: the message may be spoofed", relayPrefix(ev), dkimSummary(v), spfSummary(v))
}

func tempReason(ev evidence) string {
	return fmt.Sprintf("could not authenticate mail from %s because a DNS lookup failed temporarily (%s): defer the message and check again later",
		ev.verdict.FromDomain, strings.Join(tempFailures(ev), "; "))
}

func relayDMARCReason(ev evidence) string {
	from := domainOf(ev.relayDMARC.props["header.from"])
	if from != "" && from != ev.verdict.FromDomain {
		return fmt.Sprintf("the trusted relay %s evaluated DMARC for %s but the From domain is %s: the message is malformed or spoofed",
			ev.relay, from, ev.verdict.FromDomain)
	}
	return fmt.Sprintf("the trusted relay %s reports DMARC fail for %s: the message may be spoofed", ev.relay, ev.verdict.FromDomain)
}

func relayPrefix(ev evidence) string {
	if ev.relay == "" {
		return ""
	}
	return "according to the trusted relay " + ev.relay + ", "
}

// dkimSummary says why no DKIM signature counted.
func dkimSummary(v Verdict) string {
	if len(v.DKIM) == 0 {
		return "no DKIM signature from " + v.FromDomain
	}
	notes := make([]string, len(v.DKIM))
	for i, d := range v.DKIM {
		notes[i] = dkimNote(d, v.FromDomain, v.DMARC.DKIMAlignment)
	}
	return fmt.Sprintf("no valid DKIM signature from %s (%s)", v.FromDomain, strings.Join(notes, "; "))
}

func dkimNote(d DKIMResult, fromDomain, mode string) string {
	switch {
	case d.Result == "pass" && !d.Aligned:
		return fmt.Sprintf("%s passed but is not aligned with %s under %s alignment", signer(d), fromDomain, mode)
	case d.Error != "":
		return fmt.Sprintf("%s %s: %s", signer(d), d.Result, d.Error)
	}
	return signer(d) + " " + d.Result
}

func signer(d DKIMResult) string {
	name := "d=" + d.Domain
	if d.Domain == "" {
		name = "a signature without d="
	}
	if d.Selector != "" {
		name += " s=" + d.Selector
	}
	return name
}

// spfSummary says why SPF did not count.
func spfSummary(v Verdict) string {
	s := v.SPF
	if s.Result == "pass" && !s.Aligned {
		return fmt.Sprintf("%s, which is not aligned with %s under %s alignment", spfPhrase(s), v.FromDomain, v.DMARC.SPFAlignment)
	}
	if s.Result == "none" && s.Error != "" && s.IP == "" {
		return "SPF none (" + s.Error + ")"
	}
	return spfPhrase(s)
}

// spfPhrase is "SPF softfail for 203.0.113.9 (MAIL FROM domain example.com)".
func spfPhrase(s SPFResult) string {
	phrase := "SPF " + s.Result
	if s.IP != "" {
		phrase += " for " + s.IP
	}
	if s.Domain != "" {
		phrase += " (" + identityName(s.Identity) + " " + s.Domain + ")"
	}
	return phrase
}

func identityName(identity string) string {
	if identity == "helo" {
		return "HELO name"
	}
	return "MAIL FROM domain"
}

func tempFailures(ev evidence) []string {
	var out []string
	for _, d := range ev.verdict.DKIM {
		if d.Result == "temperror" {
			out = append(out, "DKIM key for "+signer(d)+": "+d.Error)
		}
	}
	if s := ev.verdict.SPF; s.Result == "temperror" {
		out = append(out, spfPhrase(s)+": "+s.Error)
	}
	if ev.dmarc.temporary {
		out = append(out, "DMARC record: "+ev.dmarc.errorMessage)
	}
	return out
}
