package auth

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"time"

	"github.com/emersion/go-msgauth/dkim"
)

// maxSignatures bounds the work an attacker can cause with one message; later signatures are
// ignored. Real mail carries one to three.
const maxSignatures = 8

// verifyDKIM verifies every DKIM signature of msg. The error is set only when the message cannot
// be read at all.
func verifyDKIM(ctx context.Context, r Resolver, now time.Time, msg *message) ([]DKIMResult, error) {
	opts := &dkim.VerifyOptions{
		LookupTXT:        func(name string) ([]string, error) { return r.LookupTXT(ctx, name) },
		MaxVerifications: maxSignatures,
	}
	verifs, err := dkim.VerifyWithOptions(bytes.NewReader(msg.raw), opts)
	if err != nil && !errors.Is(err, dkim.ErrTooManySignatures) {
		return nil, failWith(ErrUnauthenticated, "the message cannot be read for DKIM verification (%v)", err)
	}
	tags := signatureTags(msg.header)
	results := make([]DKIMResult, len(verifs))
	for i, v := range verifs {
		results[i] = dkimResult(v, tagsAt(tags, i), now)
	}
	return results, nil
}

// dkimResult turns one go-msgauth verification into our result. go-msgauth checks x= against the
// real clock; the check against now makes Config.Now count too.
func dkimResult(v *dkim.Verification, tags map[string]string, now time.Time) DKIMResult {
	res := DKIMResult{
		Domain:        normalizeDomain(firstNonEmpty(v.Domain, tags["d"])),
		Selector:      tags["s"],
		Algorithm:     tags["a"],
		Result:        "pass",
		SignedHeaders: v.HeaderKeys,
	}
	switch {
	case v.Err != nil:
		res.Result, res.Error = dkimErrorResult(v.Err), v.Err.Error()
	case !v.Expiration.IsZero() && now.After(v.Expiration):
		res.Result, res.Error = "permerror", "dkim: signature expired at "+v.Expiration.UTC().Format(time.RFC3339)
	}
	return res
}

func dkimErrorResult(err error) string {
	switch {
	case dkim.IsTempFail(err):
		return "temperror"
	case dkim.IsPermFail(err):
		return "permerror"
	default:
		return "fail"
	}
}

// signatureTags parses the tags of each DKIM-Signature field, top to bottom (the order go-msgauth
// reports verifications in). Only used for reporting (s=, a=); go-msgauth does the verifying.
func signatureTags(h map[string][]string) []map[string]string {
	fields := h["Dkim-Signature"]
	tags := make([]map[string]string, len(fields))
	for i, f := range fields {
		tags[i] = parseTags(f)
	}
	return tags
}

func tagsAt(tags []map[string]string, i int) map[string]string {
	if i < len(tags) {
		return tags[i]
	}
	return map[string]string{}
}

// parseTags parses a DKIM tag list ("v=1; a=rsa-sha256; d=example.com"), dropping whitespace.
func parseTags(s string) map[string]string {
	tags := map[string]string{}
	for _, part := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(part, "=")
		if ok {
			tags[strings.TrimSpace(k)] = strings.Join(strings.Fields(v), "")
		}
	}
	return tags
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
