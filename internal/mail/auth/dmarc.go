package auth

import (
	"context"
	"fmt"
	"strings"

	"github.com/emersion/go-msgauth/dmarc"
)

// dmarcPolicy is what the From domain publishes, as far as alignment needs it.
type dmarcPolicy struct {
	found        bool
	record       string // the name the record was found at
	policy       string
	adkim, aspf  alignment
	temporary    bool // the lookup failed transiently: modes unknown
	errorMessage string
}

// lookupDMARC finds the DMARC record at _dmarc.<from domain>, falling back to the organizational
// domain (RFC 7489 section 6.6.3). Without a usable record alignment is relaxed.
func lookupDMARC(ctx context.Context, r Resolver, fromDomain string) dmarcPolicy {
	p := dmarcPolicy{adkim: relaxed, aspf: relaxed}
	for _, domain := range dmarcCandidates(fromDomain) {
		name := "_dmarc." + domain
		txts, err := r.LookupTXT(ctx, name)
		if isTemporary(err) {
			p.temporary, p.errorMessage = true, err.Error()
			return p
		}
		rec, ok, perr := parseDMARC(txts)
		if perr != nil {
			p.errorMessage = fmt.Sprintf("ignoring the record at %s: %v", name, perr)
			return p
		}
		if ok {
			return p.with(rec, name, domain != fromDomain)
		}
	}
	return p
}

func dmarcCandidates(fromDomain string) []string {
	if org := orgDomain(fromDomain); org != fromDomain {
		return []string{fromDomain, org}
	}
	return []string{fromDomain}
}

// parseDMARC picks the DMARC record among TXT records. ok is false when there is none; more than
// one is an error (RFC 7489 section 6.6.3).
func parseDMARC(txts []string) (*dmarc.Record, bool, error) {
	var records []string
	for _, t := range txts {
		if strings.HasPrefix(strings.TrimSpace(t), "v=DMARC1") {
			records = append(records, t)
		}
	}
	switch len(records) {
	case 0:
		return nil, false, nil
	case 1:
		rec, err := dmarc.Parse(records[0])
		return rec, err == nil, err
	default:
		return nil, false, fmt.Errorf("%d DMARC records published, there must be one", len(records))
	}
}

func (p dmarcPolicy) with(rec *dmarc.Record, name string, subdomain bool) dmarcPolicy {
	p.found, p.record, p.policy = true, name, string(rec.Policy)
	if subdomain && rec.SubdomainPolicy != "" {
		p.policy = string(rec.SubdomainPolicy)
	}
	if rec.DKIMAlignment == dmarc.AlignmentStrict {
		p.adkim = strict
	}
	if rec.SPFAlignment == dmarc.AlignmentStrict {
		p.aspf = strict
	}
	return p
}
