package auth

// Verdict is the outcome of Check, with everything an operator needs to debug it. It is printed as
// JSON by `webordinary mail inspect`.
type Verdict struct {
	// From is the single address in the From header, as checked. Match owners against this, not
	// against a From parsed elsewhere.
	From string `json:"from,omitempty"`
	// FromDomain is From's domain, lowercased (A-labels for internationalized names).
	FromDomain string `json:"fromDomain"`
	// DKIM has one entry per DKIM signature (or per dkim result the trusted relay reported).
	DKIM []DKIMResult `json:"dkim"`
	// SPF is the SPF result for the MAIL FROM domain, or for HELO when MAIL FROM is empty.
	SPF SPFResult `json:"spf"`
	// DMARC is the alignment evaluation and the policy the From domain publishes.
	DMARC DMARCResult `json:"dmarc"`
	// Source is "verified" (we checked), "authentication-results:<authserv-id>" (the trusted
	// relay checked) or "unchecked" (policy none).
	Source string `json:"source"`
	// Pass says whether the message meets the policy.
	Pass bool `json:"pass"`
	// Reason is one sentence a person can act on.
	Reason string `json:"reason"`
}

// DKIMResult is the outcome for one DKIM signature.
type DKIMResult struct {
	// Domain is the signing domain (d=).
	Domain string `json:"domain"`
	// Selector is s=; empty when the relay did not report it.
	Selector string `json:"selector,omitempty"`
	// Algorithm is a= (rsa-sha256, ed25519-sha256; rsa-sha1 is always a permerror).
	Algorithm string `json:"algorithm,omitempty"`
	// Result is pass, fail, neutral, policy, temperror or permerror.
	Result string `json:"result"`
	// Aligned says whether Domain is aligned with the From domain under the alignment mode used.
	Aligned bool `json:"aligned"`
	// SignedHeaders lists the header fields the signature covers (h=); headers outside it can have
	// been added or changed by anyone.
	SignedHeaders []string `json:"signedHeaders,omitempty"`
	// Error says why the signature did not pass.
	Error string `json:"error,omitempty"`
}

// SPFResult is the SPF outcome.
type SPFResult struct {
	// Result is pass, fail, softfail, neutral, none, temperror or permerror.
	Result string `json:"result"`
	// Domain is the domain checked: the MAIL FROM domain, or the HELO name.
	Domain string `json:"domain,omitempty"`
	// Identity says which one Domain is: "mailfrom" or "helo".
	Identity string `json:"identity,omitempty"`
	// IP is the client address checked.
	IP string `json:"ip,omitempty"`
	// Aligned says whether Domain is aligned with the From domain under the alignment mode used.
	Aligned bool `json:"aligned"`
	// Error is the SPF library's explanation, or why SPF was not checked.
	Error string `json:"error,omitempty"`
}

// DMARCResult is the DMARC-style evaluation of the message.
type DMARCResult struct {
	// Result is pass (an identifier aligned and passed), fail (none did, and the domain publishes
	// DMARC), none (none did, and no DMARC record was found) or temperror.
	Result string `json:"result"`
	// Policy is the published p= (or sp= for a subdomain): none, quarantine or reject. Empty when
	// no record was found, or in trusted-relay mode. It is reported, never relied on.
	Policy string `json:"policy,omitempty"`
	// Record is the name the DMARC record was found at (_dmarc.<domain>).
	Record string `json:"record,omitempty"`
	// DKIMAlignment and SPFAlignment are "relaxed" or "strict" (adkim=, aspf=).
	DKIMAlignment string `json:"adkim"`
	SPFAlignment  string `json:"aspf"`
	// AlignedBy says which identifier passed aligned: "dkim", "spf", or empty.
	AlignedBy string `json:"alignedBy,omitempty"`
	// Reported is the dmarc= result the trusted relay wrote, if any.
	Reported string `json:"reported,omitempty"`
	// Error says why the DMARC record could not be used.
	Error string `json:"error,omitempty"`
}
