package auth

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"
)

// testKeys are generated once per test binary: RSA-2048 generation is slow.
var testKeys = sync.OnceValues(func() (*rsa.PrivateKey, ed25519.PrivateKey) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return rsaKey, edKey
})

// fixture is one test's world: keys, and the DNS they are published in.
type fixture struct {
	rsa *rsa.PrivateKey
	ed  ed25519.PrivateKey
	dns *StaticResolver
}

// The test world. example.com allows 192.0.2.0/24 and publishes p=reject (relaxed);
// strict.example publishes adkim=s aspf=s; soft.example ends in ~all; none.example has no SPF;
// temp-spf.example includes a domain whose DNS times out, temp-dmarc.example's DMARC record times
// out, and selector "slow" of example.com times out. Selectors "rsa" and "ed" hold the test keys.
const (
	goodIP     = "192.0.2.10"
	strangerIP = "203.0.113.9"
)

func setup(t *testing.T) *fixture {
	t.Helper()
	rsaKey, edKey := testKeys()
	f := &fixture{rsa: rsaKey, ed: edKey, dns: &StaticResolver{TXT: map[string][]string{
		"example.com":               {"v=spf1 ip4:192.0.2.0/24 -all"},
		"_dmarc.example.com":        {"v=DMARC1; p=reject"},
		"soft.example":              {"v=spf1 ip4:192.0.2.0/24 ~all"},
		"_dmarc.strict.example":     {"v=DMARC1; p=quarantine; adkim=s; aspf=s"},
		"esp.example":               {"v=spf1 ip4:192.0.2.0/24 -all"},
		"mail.example.com":          {"v=spf1 ip4:192.0.2.0/24 -all"},
		"_dmarc.victim.example":     {"v=DMARC1; p=none"},
		"_dmarc.sub.example.com":    {"v=DMARC1; p=none"},
		"victim.example":            {"v=spf1 -all"},
		"attacker.example":          {"v=spf1 +all"},
		"_dmarc.attacker.example":   {"v=DMARC1; p=none"},
		"temp-spf.example":          {"v=spf1 include:slow.example -all"},
		"_dmarc.temp-spf.example":   {"v=DMARC1; p=reject"},
		"_dmarc.temp-dmarc.example": {"v=DMARC1; p=reject"},
	}}}
	for _, d := range []string{"example.com", "mail.example.com", "attacker.example", "strict.example", "mail.strict.example", "temp-dmarc.example", "mail.temp-dmarc.example"} {
		f.publish(t, "rsa", d, rsaKey.Public())
		f.publish(t, "ed", d, edKey.Public())
	}
	f.dns.TempFail = []string{"slow.example", "_dmarc.temp-dmarc.example", "slow._domainkey.example.com"}
	return f
}

// publish puts a DKIM public key record at <selector>._domainkey.<domain>.
func (f *fixture) publish(t *testing.T, selector, domain string, pub crypto.PublicKey) {
	t.Helper()
	f.dns.TXT[selector+"._domainkey."+domain] = []string{dkimRecord(t, pub)}
}

func dkimRecord(t *testing.T, pub crypto.PublicKey) string {
	t.Helper()
	if ed, ok := pub.(ed25519.PublicKey); ok {
		return "v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(ed)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return "v=DKIM1; k=rsa; p=" + base64.StdEncoding.EncodeToString(der)
}

// signer returns the key for a selector of the fixture ("rsa" or "ed").
func (f *fixture) signer(selector string) crypto.Signer {
	if selector == "ed" {
		return f.ed
	}
	return f.rsa
}

// sign signs raw as domain with the fixture key of selector, relaxed/relaxed.
func (f *fixture) sign(t *testing.T, raw []byte, selector, domain string) []byte {
	t.Helper()
	return signWith(t, raw, &dkim.SignOptions{
		Domain: domain, Selector: selector, Signer: f.signer(selector),
		HeaderCanonicalization: dkim.CanonicalizationRelaxed,
		BodyCanonicalization:   dkim.CanonicalizationRelaxed,
	})
}

func signWith(t *testing.T, raw []byte, opts *dkim.SignOptions) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := dkim.Sign(&out, bytes.NewReader(raw), opts); err != nil {
		t.Fatalf("dkim sign: %v", err)
	}
	return out.Bytes()
}

// newMessage builds a CRLF message from header lines and a body.
func newMessage(body string, headers ...string) []byte {
	h := append([]string{}, headers...)
	h = append(h, "To: agent@webordinary.example", "Subject: please update the homepage",
		"Date: Mon, 02 Mar 2026 10:00:00 +0000", "Message-ID: <1@example.com>")
	return []byte(strings.Join(h, "\r\n") + "\r\n\r\n" + strings.ReplaceAll(body, "\n", "\r\n"))
}

func from(addr string) string { return "From: " + addr }

const instructions = "Change the opening hours to 9-17.\n"

// check runs Check with the fixture's DNS.
func (f *fixture) check(t *testing.T, policy Policy, raw []byte, env Envelope) (Verdict, error) {
	t.Helper()
	cfg := Config{Resolver: f.dns, Now: func() time.Time { return time.Now() }}
	return Check(context.Background(), cfg, policy, raw, env)
}

func mx(ip, mailFrom string) Envelope {
	return Envelope{RemoteIP: net.ParseIP(ip), Helo: "mail.sender.example", MailFrom: mailFrom}
}

// replaceBody swaps the body of a signed message, keeping the header and its signature.
func replaceBody(t *testing.T, raw []byte, body string) []byte {
	t.Helper()
	head, _, ok := bytes.Cut(raw, []byte("\r\n\r\n"))
	if !ok {
		t.Fatal("message has no body")
	}
	return append(append(head, "\r\n\r\n"...), strings.ReplaceAll(body, "\n", "\r\n")...)
}

// noDNS fails the test on any lookup: trusted-relay mode must not touch DNS.
type noDNS struct{ t *testing.T }

func (n noDNS) LookupTXT(_ context.Context, name string) ([]string, error) {
	n.t.Errorf("unexpected dns lookup TXT %s", name)
	return nil, &net.DNSError{Err: "unexpected", IsNotFound: true}
}

func (n noDNS) LookupMX(_ context.Context, name string) ([]*net.MX, error) {
	n.t.Errorf("unexpected dns lookup MX %s", name)
	return nil, &net.DNSError{Err: "unexpected", IsNotFound: true}
}

func (n noDNS) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	n.t.Errorf("unexpected dns lookup A %s", host)
	return nil, &net.DNSError{Err: "unexpected", IsNotFound: true}
}

func (n noDNS) LookupAddr(_ context.Context, addr string) ([]string, error) {
	n.t.Errorf("unexpected dns lookup PTR %s", addr)
	return nil, &net.DNSError{Err: "unexpected", IsNotFound: true}
}
