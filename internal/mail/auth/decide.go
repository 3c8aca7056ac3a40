package auth

import (
	"context"
	"errors"
)

// evidence is everything Check decides on.
type evidence struct {
	verdict       Verdict // From, FromDomain, DKIM, SPF and Source filled in
	dmarc         dmarcPolicy
	unreadable    error  // the message could not be read for DKIM
	relay         string // the trusted authserv-id, or "" when we verified ourselves
	noRelayHeader bool   // trusted mode, and the relay wrote no Authentication-Results
	relayDMARC    resInfo
	hasRelayDMARC bool
}

func newEvidence(msg *message, source string) evidence {
	return evidence{
		verdict: Verdict{From: msg.from, FromDomain: msg.fromDomain, DKIM: []DKIMResult{}, Source: source},
		dmarc:   dmarcPolicy{adkim: relaxed, aspf: relaxed},
	}
}

// verify gathers the evidence ourselves: DKIM, SPF and the DMARC record, over DNS.
func verify(ctx context.Context, cfg Config, msg *message, env Envelope) evidence {
	r := dnsErrors{cfg.Resolver}
	ev := newEvidence(msg, "verified")
	ev.verdict.DKIM, ev.unreadable = verifyDKIM(ctx, r, cfg.Now(), msg)
	if ev.verdict.DKIM == nil {
		ev.verdict.DKIM = []DKIMResult{}
	}
	ev.verdict.SPF = checkSPF(ctx, r, env)
	ev.dmarc = lookupDMARC(ctx, r, msg.fromDomain)
	return ev
}

// decide applies policy to the evidence.
func decide(policy Policy, ev evidence) (Verdict, error) {
	markAlignment(&ev)
	v := &ev.verdict
	err := outcome(policy, ev)
	v.Pass = err == nil
	if err != nil {
		v.Reason = reasonOf(err)
	} else {
		v.Reason = passReason(ev)
	}
	v.DMARC.Result = dmarcResult(ev, err)
	return *v, err
}

// outcome is nil for a pass, or the error saying why not.
func outcome(policy Policy, ev evidence) error {
	switch {
	case ev.unreadable != nil:
		return ev.unreadable
	case ev.noRelayHeader:
		return failWith(ErrUnauthenticated, "the message has no Authentication-Results header from the trusted relay %s, so it did not come through it (or %q is not the relay's authserv-id): its sender is unverified", ev.relay, ev.relay)
	case relayDMARCRejects(ev):
		return failWith(ErrUnauthenticated, "%s", relayDMARCReason(ev))
	case dkimAlignedPass(ev.verdict) != nil:
		return nil
	case spfAlignedPass(ev.verdict) && policy == RequireAligned:
		return nil
	case ev.relay == "" && retryable(policy, ev):
		return failWith(ErrTemporary, "%s", tempReason(ev))
	}
	return failWith(ErrUnauthenticated, "%s", failReason(policy, ev))
}

// markAlignment sets the Aligned flags and the DMARC fields that do not depend on the outcome.
// When the DMARC record could not be fetched the modes are unknown, so strict is assumed.
func markAlignment(ev *evidence) {
	adkim, aspf := ev.dmarc.adkim, ev.dmarc.aspf
	if ev.dmarc.temporary {
		adkim, aspf = strict, strict
	}
	v := &ev.verdict
	for i := range v.DKIM {
		v.DKIM[i].Aligned = aligned(v.DKIM[i].Domain, v.FromDomain, adkim)
	}
	v.SPF.Aligned = aligned(v.SPF.Domain, v.FromDomain, aspf)
	v.DMARC = DMARCResult{
		Policy: ev.dmarc.policy, Record: ev.dmarc.record, Error: ev.dmarc.errorMessage,
		DKIMAlignment: string(adkim), SPFAlignment: string(aspf),
		Reported: ev.relayDMARC.result,
	}
	v.DMARC.AlignedBy = alignedBy(*v)
}

func alignedBy(v Verdict) string {
	switch {
	case dkimAlignedPass(v) != nil:
		return "dkim"
	case spfAlignedPass(v):
		return "spf"
	}
	return ""
}

func dkimAlignedPass(v Verdict) *DKIMResult {
	for i, d := range v.DKIM {
		if d.Result == "pass" && d.Aligned {
			return &v.DKIM[i]
		}
	}
	return nil
}

func spfAlignedPass(v Verdict) bool {
	return v.SPF.Result == "pass" && v.SPF.Aligned
}

// relayDMARCRejects: the trusted relay evaluated DMARC and it failed, or it evaluated it for
// another From domain than ours (the two parsers disagree on who the sender is).
func relayDMARCRejects(ev evidence) bool {
	if !ev.hasRelayDMARC {
		return false
	}
	from := ev.relayDMARC.props["header.from"]
	if from != "" && domainOf(from) != ev.verdict.FromDomain {
		return true
	}
	return ev.relayDMARC.result == "fail"
}

// retryable says whether a transient DNS failure could have hidden a pass.
func retryable(policy Policy, ev evidence) bool {
	v := ev.verdict
	relaxedOK := func(d string) bool { return aligned(d, v.FromDomain, relaxed) }
	spfCounts := policy == RequireAligned && relaxedOK(v.SPF.Domain)
	for _, d := range v.DKIM {
		if relaxedOK(d.Domain) && (d.Result == "temperror" || ev.dmarc.temporary && d.Result == "pass") {
			return true
		}
	}
	return spfCounts && (v.SPF.Result == "temperror" || ev.dmarc.temporary && v.SPF.Result == "pass")
}

func dmarcResult(ev evidence, err error) string {
	switch {
	case ev.verdict.DMARC.AlignedBy != "" && !relayDMARCRejects(ev):
		return "pass"
	case errors.Is(err, ErrTemporary):
		return "temperror"
	case ev.dmarc.found || relayDMARCRejects(ev):
		return "fail"
	}
	return "none"
}
