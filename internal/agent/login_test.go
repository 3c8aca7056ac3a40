package agent

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeLogin writes a Claude Code login (.credentials.json as `claude /login` leaves it) into
// a new directory and returns it.
func writeLogin(t *testing.T, expires time.Time) string {
	t.Helper()
	dir := t.TempDir()
	creds := map[string]any{
		"claudeAiOauth": map[string]any{"accessToken": "sk-ant-oat01-access", "refreshToken": "sk-ant-ort01-refresh",
			"expiresAt": expires.UnixMilli(), "scopes": []string{"user:inference"}, "subscriptionType": "max"},
		"mcpOAuth": map[string]any{"github": map[string]any{"accessToken": "gho_other_secret"}},
	}
	b, _ := json.Marshal(creds)
	if err := os.WriteFile(filepath.Join(dir, ".credentials.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestShareClaudeLogin: the login's access token is copied into a tenant's agent config,
// read-only and without the refresh token (a tenant can never rotate the shared login) or
// anything else in the file; an expired or missing login is refused with what to do.
func TestShareClaudeLogin(t *testing.T) {
	t.Parallel()
	now := time.Now()
	src, dst := writeLogin(t, now.Add(time.Hour)), t.TempDir()
	if err := ShareClaudeLogin(src, dst, now); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dst, ".credentials.json")
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o400 {
		t.Fatalf("copy: %v, mode %v; want 0400", err, fi.Mode())
	}
	b, _ := os.ReadFile(path)
	if s := string(b); !strings.Contains(s, "sk-ant-oat01-access") || strings.Contains(s, "refresh") || strings.Contains(s, "gho_") {
		t.Fatalf("copied login: %s", s)
	}
	if err := ShareClaudeLogin(src, dst, now); err != nil { // again: the read-only copy is replaced
		t.Fatalf("second share: %v", err)
	}

	expired := writeLogin(t, now.Add(2*time.Minute))
	if err := ShareClaudeLogin(expired, t.TempDir(), now); !errors.Is(err, ErrLoginExpired) || !strings.Contains(err.Error(), "claude") {
		t.Fatalf("a login about to expire: %v; want ErrLoginExpired saying to refresh it", err)
	}
	if err := ShareClaudeLogin(t.TempDir(), t.TempDir(), now); err == nil || !strings.Contains(err.Error(), "/login") {
		t.Fatalf("no login: %v", err)
	}
}
