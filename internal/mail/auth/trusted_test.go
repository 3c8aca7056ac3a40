package auth

import (
	"context"
	"errors"
	"net"
	"reflect"
	"testing"
)

const relay = "mx.relay.example"

func TestCheckTrustedRelay(t *testing.T) {
	t.Parallel()
	owner := from("Owner <owner@example.com>")
	tests := []struct {
		name       string
		policy     Policy
		headers    []string // above From, top first, as the relay and the sender left them
		wantErr    error
		wantDKIM   []string
		wantReason []string
	}{
		{
			name:     "trusted dkim pass for the From domain passes",
			headers:  []string{"Authentication-Results: mx.relay.example; dkim=pass header.d=example.com header.s=sel"},
			wantDKIM: []string{"pass"}, wantReason: []string{"according to the trusted relay mx.relay.example, DKIM signature from d=example.com s=sel passed"},
		},
		{
			name: "forged pass with another authserv-id is ignored",
			headers: []string{
				"Authentication-Results: mx.relay.example; dkim=fail reason=\"bad signature\" header.d=example.com; spf=softfail smtp.mailfrom=example.com",
				"Authentication-Results: mx.google.com; dkim=pass header.d=example.com; spf=pass smtp.mailfrom=example.com; dmarc=pass header.from=example.com",
			},
			wantErr: ErrUnauthenticated, wantDKIM: []string{"fail"},
			wantReason: []string{"d=example.com fail: bad signature", "SPF softfail"},
		},
		{
			name: "forged pass with another authserv-id above the trusted header is ignored",
			headers: []string{
				"Authentication-Results: mx.google.com; dkim=pass header.d=example.com; spf=pass smtp.mailfrom=example.com",
				"Authentication-Results: mx.relay.example; dkim=fail header.d=example.com; spf=fail smtp.mailfrom=example.com",
			},
			wantErr: ErrUnauthenticated, wantDKIM: []string{"fail"},
		},
		{
			name:    "only a forged header fails",
			headers: []string{"Authentication-Results: mx.google.com; dkim=pass header.d=example.com; spf=pass smtp.mailfrom=example.com"},
			wantErr: ErrUnauthenticated, wantDKIM: []string{},
			wantReason: []string{"no Authentication-Results header from the trusted relay mx.relay.example"},
		},
		{
			name: "forged header with the trusted id below the real one is ignored",
			headers: []string{
				"Authentication-Results: mx.relay.example; dkim=none; spf=fail smtp.mailfrom=example.com",
				"Received: from attacker by mx.relay.example",
				"Authentication-Results: mx.relay.example; dkim=pass header.d=example.com; spf=pass smtp.mailfrom=example.com",
			},
			wantErr: ErrUnauthenticated, wantDKIM: []string{"none"},
		},
		{
			name: "only the relay's topmost header counts: a dkim=pass below it is the sender's",
			headers: []string{
				"Authentication-Results: mx.relay.example; spf=fail smtp.mailfrom=example.com",
				"Authentication-Results: mx.relay.example; dkim=pass header.d=example.com",
			},
			wantErr: ErrUnauthenticated, wantDKIM: []string{},
		},
		{
			name:     "OpenDKIM comment with a semicolon",
			headers:  []string{"Authentication-Results: mx.relay.example;\r\n\tdkim=pass (2048-bit key; unprotected) header.d=example.com header.i=@example.com header.b=\"AbCd;eF\""},
			wantDKIM: []string{"pass"},
		},
		{
			name:     "Amazon SES style with header.i and envelope-from",
			headers:  []string{"Authentication-Results: mx.relay.example;\r\n spf=pass (spfCheck: domain of example.com designates 192.0.2.10 as permitted sender) client-ip=192.0.2.10; envelope-from=bounce@mail.example.com; helo=mail.example.com;\r\n dkim=pass header.i=@example.com;\r\n dmarc=pass header.from=example.com;"},
			wantDKIM: []string{"pass"},
		},
		{
			name:    "SES style SPF pass alone is not enough under dkim",
			policy:  RequireDKIM,
			headers: []string{"Authentication-Results: mx.relay.example; spf=pass client-ip=192.0.2.10; envelope-from=bounce@example.com; dkim=none"},
			wantErr: ErrUnauthenticated, wantReason: []string{"requires DKIM", "SPF pass for 192.0.2.10 (MAIL FROM domain example.com)"},
		},
		{
			name:    "SPF pass alone is enough under aligned",
			headers: []string{"Authentication-Results: mx.relay.example; spf=pass smtp.mailfrom=bounce@example.com; dkim=none"},
		},
		{
			name:    "dkim pass for another organization is not aligned",
			headers: []string{"Authentication-Results: mx.relay.example; dkim=pass header.d=attacker.example"},
			wantErr: ErrUnauthenticated, wantReason: []string{"d=attacker.example passed but is not aligned"},
		},
		{
			name:    "relay dmarc fail wins",
			headers: []string{"Authentication-Results: mx.relay.example; dkim=pass header.d=mail.example.com; dmarc=fail header.from=example.com"},
			wantErr: ErrUnauthenticated, wantReason: []string{"reports DMARC fail for example.com"},
		},
		{
			name:    "relay evaluated another From domain",
			headers: []string{"Authentication-Results: mx.relay.example; dkim=pass header.d=example.com; dmarc=pass header.from=victim.example"},
			wantErr: ErrUnauthenticated, wantReason: []string{"evaluated DMARC for victim.example but the From domain is example.com"},
		},
		{
			name:    "relay temperror is not retryable",
			headers: []string{"Authentication-Results: mx.relay.example; dkim=temperror header.d=example.com"},
			wantErr: ErrUnauthenticated, wantDKIM: []string{"temperror"},
		},
		{
			name:    "authserv-id is matched case-insensitively, with a version",
			headers: []string{"Authentication-Results: MX.Relay.Example 1; dkim=pass header.d=example.com"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{Resolver: noDNS{t}, TrustedAuthServID: relay}
			raw := newMessage(instructions, append(tc.headers, owner)...)
			v, err := Check(context.Background(), cfg, tc.policy, raw, Envelope{RemoteIP: net.ParseIP(strangerIP), FromRelay: true})
			assertVerdict(t, checkCase{wantErr: tc.wantErr, wantDKIM: tc.wantDKIM, wantReason: tc.wantReason}, v, err)
			if v.Source != "authentication-results:"+relay {
				t.Errorf("source = %q", v.Source)
			}
		})
	}
}

// TestCheckRelayHeaderNotFromRelay: the trusted relay's Authentication-Results on a message
// that did not come from the relay decide nothing; the message is verified like any other.
func TestCheckRelayHeaderNotFromRelay(t *testing.T) {
	t.Parallel()
	f := setup(t)
	cfg := Config{Resolver: f.dns, TrustedAuthServID: relay}
	forged := "Authentication-Results: mx.relay.example; dkim=pass header.d=example.com; spf=pass smtp.mailfrom=example.com; dmarc=pass header.from=example.com"
	raw := newMessage(instructions, forged, from("Owner <owner@example.com>"))
	v, err := Check(context.Background(), cfg, RequireAligned, raw, mx(strangerIP, "owner@example.com"))
	if !errors.Is(err, ErrUnauthenticated) || v.Pass || v.Source != "verified" {
		t.Fatalf("forged relay header from elsewhere: err = %v, verdict %+v; want unauthenticated, verified by us", err, v)
	}
	v, err = Check(context.Background(), cfg, RequireAligned, signed("owner@example.com", "rsa", "example.com")(t, f), mx(strangerIP, "owner@example.com"))
	if err != nil || v.Source != "verified" {
		t.Fatalf("signed mail from elsewhere: err = %v, verdict %+v; want a pass verified by us", err, v)
	}
}

func TestParseAuthResults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		value string
		want  authResults
		ok    bool
	}{
		{
			name:  "plain",
			value: "mx.example.net; dkim=pass header.d=example.com",
			want:  authResults{servID: "mx.example.net", results: []resInfo{{"dkim", "pass", map[string]string{"header.d": "example.com"}}}},
			ok:    true,
		},
		{
			name:  "comments quotes versions and spaces",
			value: "\"mx.example.net\" 1; (c;o(m)ment) DKIM/1 = Pass (1024-bit key; x) reason=\"good; sig\" header.d = example.com;\r\n spf=softfail smtp.mailfrom=a@b.example",
			want: authResults{servID: "mx.example.net", results: []resInfo{
				{"dkim", "pass", map[string]string{"reason": "good; sig", "header.d": "example.com"}},
				{"spf", "softfail", map[string]string{"smtp.mailfrom": "a@b.example"}},
			}},
			ok: true,
		},
		{
			name:  "no result",
			value: "mx.example.net; none",
			want:  authResults{servID: "mx.example.net"},
			ok:    true,
		},
		{
			name:  "empty",
			value: " (only a comment) ",
		},
		{
			name:  "unterminated comment hides the rest",
			value: "mx.example.net; dkim=fail (oops; dkim=pass header.d=example.com",
			want:  authResults{servID: "mx.example.net", results: []resInfo{{"dkim", "fail", map[string]string{}}}},
			ok:    true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := parseAuthResults(tc.value)
			if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("parseAuthResults(%q) = %+v, %v; want %+v, %v", tc.value, got, ok, tc.want, tc.ok)
			}
		})
	}
}
