package egress

import (
	"net/netip"
	"testing"
)

func TestPublic(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"1.1.1.1": true, "2606:4700:4700::1111": true, "104.16.0.1": true,
		"127.0.0.1": false, "127.1.2.3": false, "::1": false, "0.0.0.0": false, "0.1.2.3": false, "::": false,
		"10.0.0.1": false, "172.16.0.1": false, "192.168.1.1": false, "100.64.0.1": false,
		"169.254.169.254": false, "fe80::1": false, "fc00::1": false, "fd00:ec2::254": false,
		"224.0.0.1": false, "ff02::1": false, "198.18.0.1": false, "255.255.255.255": false,
		"64:ff9b::7f00:1": false, "2002:7f00:1::": false,
	} {
		a := netip.MustParseAddr(addr).Unmap()
		if got := public(a); got != want {
			t.Errorf("public(%s) = %v, want %v", addr, got, want)
		}
	}
	if public(netip.MustParseAddr("::ffff:127.0.0.1")) {
		t.Error("an IPv4-mapped loopback address counts as public")
	}
}

func TestAllows(t *testing.T) {
	t.Parallel()
	p := Policy{Allow: []string{"registry.npmjs.org", "git.example.com:8443", "*.cdn.example", "Upper.Example"}}.normalized()
	for _, c := range []struct {
		host, port string
		want       bool
	}{
		{"registry.npmjs.org", "443", true}, {"registry.npmjs.org", "80", true}, {"REGISTRY.npmjs.org.", "443", true},
		{"registry.npmjs.org", "22", false}, {"evil-registry.npmjs.org", "443", false}, {"registry.npmjs.org.evil", "443", false},
		{"git.example.com", "8443", true}, {"git.example.com", "443", false},
		{"a.cdn.example", "443", true}, {"a.b.cdn.example", "443", true}, {"cdn.example", "443", false}, {"xcdn.example", "443", false},
		{"upper.example", "443", true},
	} {
		if got := p.allows(c.host, c.port); got != c.want {
			t.Errorf("allows(%s, %s) = %v, want %v", c.host, c.port, got, c.want)
		}
	}
	any := Policy{Allow: []string{"*"}}.normalized()
	if !any.allows("anything.example", "443") || any.allows("anything.example", "25") {
		t.Error(`"*" should allow any host on ports 80 and 443 only`)
	}
}

func TestCheckAllow(t *testing.T) {
	t.Parallel()
	for entry, ok := range map[string]bool{
		"registry.npmjs.org": true, "git.example.com:8443": true, "*.cdn.example": true, "*": true, "10.0.0.5:4873": true,
		"": false, "https://registry.npmjs.org": false, "registry.npmjs.org/": false, "a*.example": false,
		"*example.com": false, "x.*.example": false, "host:0": false, "host:99999": false, "user@host": false,
	} {
		if err := CheckAllow(entry); (err == nil) != ok {
			t.Errorf("CheckAllow(%q) = %v, want ok %v", entry, err, ok)
		}
	}
}

// TestModelPath: with the platform's key, only model calls pass, whatever the base path.
func TestModelPath(t *testing.T) {
	t.Parallel()
	anthropic, _ := AnthropicModel("", "k")
	anthropicV1, _ := AnthropicModel("https://api.anthropic.com/v1", "k") // opencode's base
	openai, _ := OpenAIModel("", "k")
	gateway, _ := OpenAIModel("https://gw.example/openai/v1", "k")
	cases := []struct {
		m    Model
		rest string
		ok   bool
	}{
		{anthropic, "v1/messages", true},
		{anthropic, "v1/messages/count_tokens", true},
		{anthropic, "v1/models/claude-x", true},
		{anthropicV1, "v1/messages", true},
		{openai, "v1/responses", true},
		{openai, "v1/chat/completions", true},
		{gateway, "openai/v1/responses", true},
		{anthropic, "v1/files", false},
		{anthropic, "v1/messages/batches", false},
		{anthropic, "v1/messages/../files", false},
		{anthropic, "/v1/messages", false},
		{openai, "v1/files", false},
		{openai, "responses", false}, // outside the base path /v1
		{gateway, "v1/responses", false},
	}
	for _, c := range cases {
		if got := modelPath(c.m, c.rest); got != c.ok {
			t.Errorf("modelPath(%s%s, %q) = %v, want %v", c.m.Upstream, c.m.Path, c.rest, got, c.ok)
		}
	}
}
