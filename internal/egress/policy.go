package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Policy is what one job may reach.
type Policy struct {
	// Allow are the hosts a job may reach: "host" (ports 80 and 443), "host:port", or
	// "*.domain" (any subdomain of domain, ports 80 and 443), or "*" (any host, ports 80 and
	// 443; non-public addresses stay refused). Empty: none.
	Allow []string
	// Private are "host:port" destinations allowed even where they resolve to a loopback,
	// private or link-local address (an operator's internal registry, tests). Each must also
	// be allowed by Allow.
	Private []string
	// Models are the model routes the job's agent uses through the proxy.
	Models []Model
	// MaxCostUSD stops the job's model calls once what they cost at list prices (Usage.CostUSD)
	// reaches it: the next call is refused (402), whatever the agent. 0: no budget.
	MaxCostUSD float64
}

func (p Policy) normalized() Policy {
	low := func(in []string) []string {
		out := make([]string, 0, len(in))
		for _, h := range in {
			if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
				out = append(out, h)
			}
		}
		return out
	}
	p.Allow, p.Private = low(p.Allow), low(p.Private)
	return p
}

// allows reports whether host:port is on the allowlist.
func (p Policy) allows(host, port string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, a := range p.Allow {
		ah, ap, err := net.SplitHostPort(a)
		if err != nil {
			ah, ap = a, ""
		}
		if ap == "" && port != "80" && port != "443" || ap != "" && ap != port {
			continue
		}
		if ah == "*" || ah == host || strings.HasPrefix(ah, "*.") && strings.HasSuffix(host, ah[1:]) {
			return true
		}
	}
	return false
}

// privateOK reports whether host:port may resolve to a non-public address.
func (p Policy) privateOK(host, port string) bool {
	return slices.Contains(p.Private, strings.ToLower(net.JoinHostPort(host, port)))
}

// resolve looks host up once; the caller dials one of the addresses it checked.
func (s *Session) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a.Unmap()}, nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	for i := range addrs {
		addrs[i] = addrs[i].Unmap()
	}
	return addrs, err
}

// notPublic are ranges IsGlobalUnicast and IsPrivate let through that are not public either:
// "this network" (0/8 reaches the host itself on Linux), carrier-grade NAT, benchmarking, and
// IPv6 prefixes that embed an IPv4 address (NAT64, 6to4).
var notPublic = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/8"), netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("198.18.0.0/15"), netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2002::/16")}

// public reports whether a is a globally routable unicast address.
func public(a netip.Addr) bool {
	if !a.IsValid() || !a.IsGlobalUnicast() || a.IsPrivate() || a.Is4In6() {
		return false
	}
	for _, p := range notPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// Denial is a destination a job was refused, and how often.
type Denial struct {
	// Target is host:port (or the request's URL host).
	Target string `json:"target"`
	// Reason says why: not on the allowlist, a non-public address, a wrong model token.
	Reason string `json:"reason"`
	// Count is how many times.
	Count int `json:"count"`
}

type denialKey struct{ target, reason string }

// maxTarget bounds a refused target's length (a job chooses it).
const maxTarget = 200

// maxDenials bounds the distinct refusals kept per session; more are counted under "…".
const maxDenials = 50

func (s *Session) deny(target, reason string) {
	if len(target) > maxTarget {
		target = target[:maxTarget] + "…"
	}
	s.p.cfg.Log.Info("egress refused", "target", target, "reason", reason)
	s.mu.Lock()
	defer s.mu.Unlock()
	k := denialKey{target, reason}
	if _, ok := s.denied[k]; !ok && len(s.denied) >= maxDenials {
		k = denialKey{"…", "more destinations"}
	}
	s.denied[k]++
}

// Denied lists what the session refused, most frequent first.
func (s *Session) Denied() []Denial {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Denial, 0, len(s.denied))
	for k, n := range s.denied {
		out = append(out, Denial{Target: k.target, Reason: k.reason, Count: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Target < out[j].Target
	})
	return out
}

// CheckAllow says what is wrong with an allowlist entry (Policy.Allow), in words a person
// can act on.
func CheckAllow(entry string) error {
	host, port, err := net.SplitHostPort(entry)
	if err != nil {
		host, port = entry, ""
	}
	bad := func(why string) error {
		return fmt.Errorf("egress allow %q: %s; want HOST, HOST:PORT, *.DOMAIN or *", entry, why)
	}
	switch {
	case host == "":
		return bad("no host")
	case strings.ContainsAny(host, "/@ \t") || strings.Contains(entry, "://"):
		return bad("a host name, not a URL")
	case strings.Contains(host[min(1, len(host)):], "*") || host != "*" && strings.HasPrefix(host, "*") && !strings.HasPrefix(host, "*."):
		return bad(`"*" only as the whole entry or as "*.domain"`)
	}
	if n, err := strconv.Atoi(port); port != "" && (err != nil || n < 1 || n > 65535) {
		return bad("port out of range")
	}
	return nil
}
