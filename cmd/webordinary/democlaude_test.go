package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDemoPicksClaudeOnlyWhenARunCanSucceed: the demo's "auto" agent is Claude Code only when
// its jobs can authenticate — an API key, Bedrock, or a subscription login that is shared into
// the tenants' config (a login in ~/.claude alone is invisible to a tenant's claude) and has
// not expired; otherwise the demo agent, with the reason.
func TestDemoPicksClaudeOnlyWhenARunCanSucceed(t *testing.T) {
	t.Parallel()
	now := time.Now()
	home := func(expires time.Time) string {
		h := t.TempDir()
		if !expires.IsZero() {
			creds := fmt.Sprintf(`{"claudeAiOauth":{"accessToken":"a","refreshToken":"r","expiresAt":%d}}`, expires.UnixMilli())
			_ = os.MkdirAll(filepath.Join(h, ".claude"), 0o700)
			if err := os.WriteFile(filepath.Join(h, ".claude", ".credentials.json"), []byte(creds), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return h
	}
	installed := func(string) (string, error) { return "/usr/bin/claude", nil }
	missing := func(string) (string, error) { return "", errors.New("not found") }
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	valid, expired := home(now.Add(time.Hour)), home(now.Add(-time.Hour))
	tests := []struct {
		name      string
		look      func(string) (string, error)
		getenv    func(string) string
		home      string
		ok        bool
		login     string
		whyPrefix string
	}{
		{"not installed", missing, env("ANTHROPIC_API_KEY", "k"), valid, false, "", "the claude CLI is not installed"},
		{"API key", installed, env("ANTHROPIC_API_KEY", "k"), home(time.Time{}), true, "", ""},
		{"Bedrock", installed, env("CLAUDE_CODE_USE_BEDROCK", "1"), home(time.Time{}), true, "", ""},
		{"subscription login, shared", installed, env(), valid, true, filepath.Join(valid, ".claude"), ""},
		{"CLAUDE_CONFIG_DIR login", installed, env("CLAUDE_CONFIG_DIR", filepath.Join(valid, ".claude")), home(time.Time{}), true, filepath.Join(valid, ".claude"), ""},
		{"login expired", installed, env(), expired, false, "", "Claude Code's login"},
		{"not signed in", installed, env(), home(time.Time{}), false, "", "Claude Code is not signed in"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := chooseClaude(tt.look, tt.getenv, tt.home, now)
			if c.ok != tt.ok || c.loginDir != tt.login || !strings.HasPrefix(c.why, tt.whyPrefix) {
				t.Fatalf("chooseClaude = %+v; want ok %v, login %q, why starting %q", c, tt.ok, tt.login, tt.whyPrefix)
			}
		})
	}
}
