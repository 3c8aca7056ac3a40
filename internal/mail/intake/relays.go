package intake

import (
	"fmt"
	"net/netip"
	"strings"
)

// Relays are the addresses a trusted relay connects from: single IPs and CIDR prefixes.
type Relays []netip.Prefix

// ParseRelays reads IPs and CIDRs ("192.0.2.25", "10.0.0.0/8", "2001:db8::/32"), each value
// possibly a comma-separated list.
func ParseRelays(values []string) (Relays, error) {
	var rs Relays
	for _, v := range values {
		for item := range strings.SplitSeq(v, ",") {
			if item = strings.TrimSpace(item); item == "" {
				continue
			}
			p, err := parseRelay(item)
			if err != nil {
				return nil, err
			}
			rs = append(rs, p)
		}
	}
	return rs, nil
}

func parseRelay(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("relay %q is not an IP or CIDR (like 192.0.2.25 or 10.0.0.0/8)", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("relay %q is not an IP or CIDR (like 192.0.2.25 or 10.0.0.0/8)", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Contains reports whether ip (as Envelope.RemoteIP writes it) is one of the relays.
func (rs Relays) Contains(ip string) bool {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, p := range rs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
