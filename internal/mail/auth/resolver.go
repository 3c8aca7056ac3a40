package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
)

// Resolver is the DNS the checks use; inject a StaticResolver in tests so they run offline.
//
// Methods block for at most as long as ctx allows and are called concurrently. A name that does
// not exist must be reported as a *net.DNSError with IsNotFound, and a transient failure (timeout,
// SERVFAIL) as a *net.DNSError with IsTimeout or IsTemporary: that distinction decides between a
// permanent fail and a temperror verdict. Retrying is the caller's business, not the resolver's.
// *net.Resolver satisfies it.
type Resolver interface {
	LookupTXT(ctx context.Context, name string) ([]string, error)
	LookupMX(ctx context.Context, name string) ([]*net.MX, error)
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
	LookupAddr(ctx context.Context, addr string) ([]string, error)
}

var (
	_ Resolver = NetResolver{}
	_ Resolver = (*StaticResolver)(nil)
	_ Resolver = (*net.Resolver)(nil)
)

// NetResolver is the Resolver for production: the wrapped net.Resolver, or net.DefaultResolver
// when it is nil.
type NetResolver struct {
	Resolver *net.Resolver
}

func (r NetResolver) net() *net.Resolver {
	if r.Resolver == nil {
		return net.DefaultResolver
	}
	return r.Resolver
}

// LookupTXT returns the TXT records of name, one string per record.
func (r NetResolver) LookupTXT(ctx context.Context, name string) ([]string, error) {
	return r.net().LookupTXT(ctx, name)
}

// LookupMX returns the MX records of name.
func (r NetResolver) LookupMX(ctx context.Context, name string) ([]*net.MX, error) {
	return r.net().LookupMX(ctx, name)
}

// LookupIPAddr returns the A and AAAA records of host.
func (r NetResolver) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	return r.net().LookupIPAddr(ctx, host)
}

// LookupAddr returns the PTR names of addr.
func (r NetResolver) LookupAddr(ctx context.Context, addr string) ([]string, error) {
	return r.net().LookupAddr(ctx, addr)
}

// StaticResolver answers from maps, for tests and `mail inspect --dns-fixture`. Names are matched
// case-insensitively, with or without a trailing dot. A name absent from a map does not exist
// (IsNotFound). It is safe for concurrent use as long as nobody modifies it.
//
// As JSON (see LoadStaticResolver):
//
//	{"txt":  {"example.com": ["v=spf1 ip4:203.0.113.0/24 -all"]},
//	 "mx":   {"example.com": [{"Host": "mx.example.com.", "Pref": 10}]},
//	 "ip":   {"mx.example.com": ["203.0.113.9"]},
//	 "ptr":  {"203.0.113.9": ["mx.example.com."]},
//	 "tempfail": ["_dmarc.example.com"]}
type StaticResolver struct {
	TXT map[string][]string  `json:"txt,omitempty"`
	MX  map[string][]*net.MX `json:"mx,omitempty"`
	IP  map[string][]net.IP  `json:"ip,omitempty"`
	PTR map[string][]string  `json:"ptr,omitempty"`
	// TempFail lists names whose every lookup fails with a temporary error (like a timeout).
	TempFail []string `json:"tempfail,omitempty"`
}

// LoadStaticResolver reads a StaticResolver from JSON, rejecting unknown fields so that a typo in
// a fixture does not silently become a missing record.
func LoadStaticResolver(r io.Reader) (*StaticResolver, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var s StaticResolver
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("read dns fixture: %w", err)
	}
	return &s, nil
}

// LookupTXT returns s.TXT[name].
func (s *StaticResolver) LookupTXT(ctx context.Context, name string) ([]string, error) {
	return staticLookup(ctx, s, s.TXT, name)
}

// LookupMX returns s.MX[name].
func (s *StaticResolver) LookupMX(ctx context.Context, name string) ([]*net.MX, error) {
	return staticLookup(ctx, s, s.MX, name)
}

// LookupIPAddr returns s.IP[host].
func (s *StaticResolver) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	ips, err := staticLookup(ctx, s, s.IP, host)
	addrs := make([]net.IPAddr, len(ips))
	for i, ip := range ips {
		addrs[i] = net.IPAddr{IP: ip}
	}
	return addrs, err
}

// LookupAddr returns s.PTR[addr].
func (s *StaticResolver) LookupAddr(ctx context.Context, addr string) ([]string, error) {
	return staticLookup(ctx, s, s.PTR, addr)
}

func staticLookup[T any](ctx context.Context, s *StaticResolver, m map[string][]T, name string) ([]T, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.tempFails(name) {
		return nil, &net.DNSError{Err: "temporary failure (dns fixture)", Name: name, IsTemporary: true}
	}
	for k, v := range m {
		if sameName(k, name) {
			return v, nil
		}
	}
	return nil, &net.DNSError{Err: "no such host (dns fixture)", Name: name, IsNotFound: true}
}

func (s *StaticResolver) tempFails(name string) bool {
	for _, n := range s.TempFail {
		if sameName(n, name) {
			return true
		}
	}
	return false
}

func sameName(a, b string) bool {
	return strings.EqualFold(strings.TrimSuffix(a, "."), strings.TrimSuffix(b, "."))
}

// dnsErrors is a Resolver that hands the libraries bare *net.DNSError values: go-msgauth and
// blitiri spf classify errors by type assertion, so a wrapped temporary error would otherwise be
// taken as a permanent one.
type dnsErrors struct{ r Resolver }

func (d dnsErrors) LookupTXT(ctx context.Context, name string) ([]string, error) {
	v, err := d.r.LookupTXT(ctx, name)
	return v, bareDNSError(err)
}

func (d dnsErrors) LookupMX(ctx context.Context, name string) ([]*net.MX, error) {
	v, err := d.r.LookupMX(ctx, name)
	return v, bareDNSError(err)
}

func (d dnsErrors) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	v, err := d.r.LookupIPAddr(ctx, host)
	return v, bareDNSError(err)
}

func (d dnsErrors) LookupAddr(ctx context.Context, addr string) ([]string, error) {
	v, err := d.r.LookupAddr(ctx, addr)
	return v, bareDNSError(err)
}

func bareDNSError(err error) error {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return dnsErr
	}
	return err
}

func isTemporary(err error) bool {
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr) && (dnsErr.IsTemporary || dnsErr.IsTimeout)
}

func isNotFound(err error) bool {
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr) && dnsErr.IsNotFound
}
