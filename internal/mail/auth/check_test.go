package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"
)

type checkCase struct {
	name       string
	policy     Policy
	raw        func(t *testing.T, f *fixture) []byte
	env        Envelope
	wantErr    error // nil means pass
	wantDKIM   []string
	wantSPF    string
	wantDMARC  string
	wantReason []string // substrings of Verdict.Reason
}

func signed(from, selector, domain string) func(*testing.T, *fixture) []byte {
	return func(t *testing.T, f *fixture) []byte {
		return f.sign(t, newMessage(instructions, "From: "+from), selector, domain)
	}
}

func unsigned(from string) func(*testing.T, *fixture) []byte {
	return func(*testing.T, *fixture) []byte { return newMessage(instructions, "From: "+from) }
}

func TestCheckVerified(t *testing.T) {
	t.Parallel()
	tests := []checkCase{
		{
			name: "rsa-sha256 signed and aligned passes",
			raw:  signed("Owner <owner@example.com>", "rsa", "example.com"),
			env:  mx(strangerIP, "owner@example.com"), wantDKIM: []string{"pass"}, wantSPF: "fail", wantDMARC: "pass",
			wantReason: []string{"DKIM signature from d=example.com s=rsa passed"},
		},
		{
			name: "ed25519-sha256 signed and aligned passes",
			raw:  signed("owner@example.com", "ed", "example.com"),
			env:  mx(strangerIP, ""), wantDKIM: []string{"pass"}, wantDMARC: "pass",
		},
		{
			name: "body tampered after signing fails",
			raw: func(t *testing.T, f *fixture) []byte {
				return replaceBody(t, signed("owner@example.com", "rsa", "example.com")(t, f), "Delete the whole site.\n")
			},
			env:     mx(strangerIP, "owner@example.com"),
			wantErr: ErrUnauthenticated, wantDKIM: []string{"fail"}, wantSPF: "fail", wantDMARC: "fail",
			wantReason: []string{"d=example.com s=rsa fail", "body hash did not verify", "SPF fail for 203.0.113.9", "may be spoofed"},
		},
		{
			name:    "signed by another organization is not aligned",
			raw:     signed("Boss <boss@victim.example>", "rsa", "attacker.example"),
			env:     mx(strangerIP, "x@attacker.example"),
			wantErr: ErrUnauthenticated, wantDKIM: []string{"pass"}, wantSPF: "pass", wantDMARC: "fail",
			wantReason: []string{"d=attacker.example s=rsa passed but is not aligned", "MAIL FROM domain attacker.example), which is not aligned with victim.example"},
		},
		{
			name:     "subdomain signer passes with relaxed alignment",
			raw:      signed("owner@example.com", "rsa", "mail.example.com"),
			wantDKIM: []string{"pass"}, wantSPF: "none", wantDMARC: "pass",
		},
		{
			name:     "parent domain signer passes for a subdomain From",
			raw:      signed("owner@sub.example.com", "ed", "example.com"),
			wantDKIM: []string{"pass"}, wantDMARC: "pass",
		},
		{
			name:    "subdomain signer fails with strict alignment",
			raw:     signed("owner@strict.example", "rsa", "mail.strict.example"),
			wantErr: ErrUnauthenticated, wantDKIM: []string{"pass"}, wantDMARC: "fail",
			wantReason: []string{"passed but is not aligned with strict.example under strict alignment"},
		},
		{
			name:     "exact signer passes with strict alignment",
			raw:      signed("owner@strict.example", "rsa", "strict.example"),
			wantDKIM: []string{"pass"}, wantDMARC: "pass",
		},
		{
			name: "attacker signature plus a valid aligned one passes",
			raw: func(t *testing.T, f *fixture) []byte {
				return f.sign(t, signed("owner@example.com", "ed", "example.com")(t, f), "rsa", "attacker.example")
			},
			wantDKIM: []string{"pass", "pass"}, wantDMARC: "pass",
		},
		{
			name:     "unsigned with aligned SPF pass passes under aligned",
			raw:      unsigned("owner@example.com"),
			env:      mx(goodIP, "bounce@mail.example.com"),
			wantDKIM: []string{}, wantSPF: "pass", wantDMARC: "pass",
			wantReason: []string{"SPF pass for 192.0.2.10 (MAIL FROM domain mail.example.com), aligned with the From domain example.com"},
		},
		{
			name: "unsigned with aligned SPF pass fails under dkim", policy: RequireDKIM,
			raw:     unsigned("owner@example.com"),
			env:     mx(goodIP, "owner@example.com"),
			wantErr: ErrUnauthenticated, wantDKIM: []string{}, wantSPF: "pass", wantDMARC: "pass",
			wantReason: []string{"no DKIM signature from example.com", "requires DKIM", "SPF pass for 192.0.2.10"},
		},
		{
			name:    "SPF pass for an unaligned MAIL FROM fails",
			raw:     unsigned("owner@example.com"),
			env:     mx(goodIP, "bounce@esp.example"),
			wantErr: ErrUnauthenticated, wantSPF: "pass", wantDMARC: "fail",
			wantReason: []string{"not aligned with example.com"},
		},
		{
			name:    "SPF fail without DKIM fails naming the IP",
			raw:     unsigned("owner@example.com"),
			env:     mx(strangerIP, "owner@example.com"),
			wantErr: ErrUnauthenticated, wantSPF: "fail", wantDMARC: "fail",
			wantReason: []string{"no DKIM signature from example.com and SPF fail for 203.0.113.9", "may be spoofed"},
		},
		{
			name:    "SPF softfail without DKIM fails naming the IP",
			raw:     unsigned("owner@soft.example"),
			env:     mx(strangerIP, "owner@soft.example"),
			wantErr: ErrUnauthenticated, wantSPF: "softfail", wantDMARC: "none",
			wantReason: []string{"no DKIM signature from soft.example and SPF softfail for 203.0.113.9"},
		},
		{
			name:    "SPF none without DKIM fails naming the IP",
			raw:     unsigned("owner@none.example"),
			env:     mx(strangerIP, "owner@none.example"),
			wantErr: ErrUnauthenticated, wantSPF: "none", wantDMARC: "none",
			wantReason: []string{"SPF none for 203.0.113.9"},
		},
		{
			name:    "bounce with empty MAIL FROM checks HELO",
			raw:     unsigned("owner@example.com"),
			env:     Envelope{RemoteIP: mx(goodIP, "").RemoteIP, Helo: "mail.example.com"},
			wantSPF: "pass", wantDMARC: "pass",
		},
		{
			name:    "no client IP means SPF is not checked",
			raw:     unsigned("owner@example.com"),
			wantErr: ErrUnauthenticated, wantSPF: "none",
			wantReason: []string{"SPF none (no client IP address was given"},
		},
		{
			name:    "SPF lookup temperror defers",
			raw:     unsigned("owner@temp-spf.example"),
			env:     mx(strangerIP, "owner@temp-spf.example"),
			wantErr: ErrTemporary, wantSPF: "temperror", wantDMARC: "temperror",
			wantReason: []string{"failed temporarily", "SPF temperror for 203.0.113.9", "check again later"},
		},
		{
			name:    "DKIM key temperror defers",
			raw:     signed("owner@example.com", "slow", "example.com"),
			wantErr: ErrTemporary, wantDKIM: []string{"temperror"}, wantDMARC: "temperror",
			wantReason: []string{"DKIM key for d=example.com s=slow"},
		},
		{
			name:    "DMARC temperror defers a relaxed-only pass",
			raw:     signed("owner@temp-dmarc.example", "rsa", "mail.temp-dmarc.example"),
			wantErr: ErrTemporary, wantDKIM: []string{"pass"}, wantDMARC: "temperror",
			wantReason: []string{"DMARC record"},
		},
		{
			name:     "DMARC temperror does not matter for an exact-domain pass",
			raw:      signed("owner@temp-dmarc.example", "rsa", "temp-dmarc.example"),
			wantDKIM: []string{"pass"}, wantDMARC: "pass",
		},
		{
			name:    "temperror for an unaligned signer is a plain fail",
			raw:     signed("owner@victim.example", "slow", "example.com"),
			wantErr: ErrUnauthenticated, wantDKIM: []string{"temperror"},
		},
		{
			name:    "unknown selector is a permerror",
			raw:     signed("owner@example.com", "rsa", "none.example"),
			wantErr: ErrUnauthenticated, wantDKIM: []string{"permerror"},
		},
		{
			name: "LF line endings verify",
			raw: func(t *testing.T, f *fixture) []byte {
				return bytes.ReplaceAll(signed("owner@example.com", "rsa", "example.com")(t, f), []byte("\r\n"), []byte("\n"))
			},
			wantDKIM: []string{"pass"},
		},
		{
			name:    "missing From fails",
			raw:     func(*testing.T, *fixture) []byte { return newMessage(instructions) },
			wantErr: ErrFrom, wantReason: []string{"no From header"},
		},
		{
			name:    "two From addresses fail",
			raw:     unsigned("owner@example.com, boss@victim.example"),
			wantErr: ErrFrom, wantReason: []string{"has 2 addresses"},
		},
		{
			name: "two From headers fail even when one is signed",
			raw: func(t *testing.T, f *fixture) []byte {
				return append([]byte("From: boss@victim.example\r\n"), signed("owner@example.com", "rsa", "example.com")(t, f)...)
			},
			wantErr: ErrFrom, wantReason: []string{"2 From headers"},
		},
		{
			name:    "unparseable From fails",
			raw:     unsigned("owner at example dot com"),
			wantErr: ErrFrom, wantReason: []string{"cannot be parsed"},
		},
		{
			name: "policy none passes anything with a From", policy: AllowAll,
			raw:        unsigned("boss@victim.example"),
			wantReason: []string{"disabled"},
		},
		{
			name: "unknown policy is a config error", policy: "strict",
			raw:     unsigned("owner@example.com"),
			wantErr: ErrInvalidConfig,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			v, err := f.check(t, tc.policy, tc.raw(t, f), tc.env)
			assertVerdict(t, tc, v, err)
		})
	}
}

func assertVerdict(t *testing.T, tc checkCase, v Verdict, err error) {
	t.Helper()
	js, _ := json.MarshalIndent(v, "", "  ")
	if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
		t.Fatalf("err = %v, want %v\n%s", err, tc.wantErr, js)
	}
	if v.Pass != (tc.wantErr == nil) {
		t.Errorf("Pass = %v with err %v\n%s", v.Pass, err, js)
	}
	if tc.wantDKIM != nil && !equal(dkimResults(v), tc.wantDKIM) {
		t.Errorf("dkim = %v, want %v\n%s", dkimResults(v), tc.wantDKIM, js)
	}
	if tc.wantSPF != "" && v.SPF.Result != tc.wantSPF {
		t.Errorf("spf = %q, want %q\n%s", v.SPF.Result, tc.wantSPF, js)
	}
	if tc.wantDMARC != "" && v.DMARC.Result != tc.wantDMARC {
		t.Errorf("dmarc = %q, want %q\n%s", v.DMARC.Result, tc.wantDMARC, js)
	}
	for _, s := range tc.wantReason {
		if !strings.Contains(v.Reason, s) {
			t.Errorf("reason %q lacks %q", v.Reason, s)
		}
	}
}

func dkimResults(v Verdict) []string {
	out := []string{}
	for _, d := range v.DKIM {
		out = append(out, d.Result)
	}
	return out
}

func equal(a, b []string) bool {
	return strings.Join(a, ",") == strings.Join(b, ",")
}

func TestCheckVerdictDetails(t *testing.T) {
	t.Parallel()
	f := setup(t)
	raw := f.sign(t, newMessage(instructions, from("Owner <Owner@Mail.Example.COM>")), "ed", "example.com")
	v, err := f.check(t, "", raw, mx(goodIP, "owner@example.com"))
	if err != nil {
		t.Fatal(err)
	}
	d := v.DKIM[0]
	if v.From != "Owner@Mail.Example.COM" || v.FromDomain != "mail.example.com" || v.Source != "verified" {
		t.Errorf("from = %q, domain %q, source %q", v.From, v.FromDomain, v.Source)
	}
	if d.Domain != "example.com" || d.Selector != "ed" || d.Algorithm != "ed25519-sha256" || !d.Aligned || len(d.SignedHeaders) == 0 {
		t.Errorf("dkim = %+v", d)
	}
	if v.DMARC.Record != "_dmarc.example.com" || v.DMARC.Policy != "reject" || v.DMARC.AlignedBy != "dkim" || v.DMARC.DKIMAlignment != "relaxed" {
		t.Errorf("dmarc = %+v", v.DMARC)
	}
	if v.SPF.Domain != "example.com" || v.SPF.Identity != "mailfrom" || v.SPF.IP != goodIP || !v.SPF.Aligned {
		t.Errorf("spf = %+v", v.SPF)
	}
}

func TestCheckExpiredSignatureUsesConfigNow(t *testing.T) {
	t.Parallel()
	f := setup(t)
	raw := signWith(t, newMessage(instructions, from("owner@example.com")), &dkim.SignOptions{
		Domain: "example.com", Selector: "rsa", Signer: f.rsa, Expiration: time.Now().Add(time.Hour),
	})
	tests := []struct {
		name    string
		now     time.Time
		wantErr error
	}{
		{"before expiry", time.Now(), nil},
		{"after expiry", time.Now().Add(2 * time.Hour), ErrUnauthenticated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{Resolver: f.dns, Now: func() time.Time { return tc.now }}
			v, err := Check(context.Background(), cfg, RequireDKIM, raw, Envelope{})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != v.Pass {
				t.Fatalf("err = %v, want %v; %+v", err, tc.wantErr, v.DKIM)
			}
		})
	}
}

func TestCheckContextCanceled(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Check(ctx, Config{Resolver: f.dns}, RequireAligned, signed("owner@example.com", "rsa", "example.com")(t, f), mx(goodIP, "owner@example.com"))
	if err != context.Canceled {
		t.Fatalf("err = %v, want context.Canceled unwrapped", err)
	}
}

func TestCheckInvalidAuthServID(t *testing.T) {
	t.Parallel()
	cfg := Config{TrustedAuthServID: "mx.example.net; dkim=pass"}
	v, err := Check(context.Background(), cfg, RequireAligned, unsigned("owner@example.com")(t, nil), Envelope{})
	if !errors.Is(err, ErrInvalidConfig) || v.Pass {
		t.Fatalf("err = %v, pass = %v", err, v.Pass)
	}
}
