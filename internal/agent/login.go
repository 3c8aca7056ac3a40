package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/webordinary/webordinary/internal/durable"
)

// ErrLoginExpired means the shared Claude login's access token has expired (or is about to):
// the operator refreshes it by using claude where the login lives.
var ErrLoginExpired = errors.New("the shared Claude login has expired")

// claudeCredentials is the file `claude /login` writes ($CLAUDE_CONFIG_DIR/.credentials.json).
const claudeCredentials = ".credentials.json"

// loginMargin is how long before its expiry an access token is no longer shared: a run must be
// able to use it.
const loginMargin = 5 * time.Minute

// claudeOAuth is the part of a Claude Code login that is shared: the access token, its expiry
// and what it may do — never the refresh token.
type claudeOAuth struct {
	AccessToken      string   `json:"accessToken"`
	ExpiresAt        int64    `json:"expiresAt"` // Unix milliseconds
	Scopes           []string `json:"scopes,omitempty"`
	SubscriptionType string   `json:"subscriptionType,omitempty"`
}

// ShareClaudeLogin copies the Claude Code subscription login in srcDir (the config directory
// where an operator ran `claude /login`, e.g. ~/.claude) into a tenant's agent config
// directory dstDir (its CLAUDE_CONFIG_DIR), read-only (0400). Only the access token, its
// expiry, scopes and subscription type are copied: not the refresh token (so a tenant's agent
// can never rotate, and so invalidate, the shared login) and nothing else from the file. A
// token that expires within five minutes is refused (ErrLoginExpired). Safe for concurrent
// use on different dstDirs.
func ShareClaudeLogin(srcDir, dstDir string, now time.Time) error {
	login, err := readClaudeLogin(srcDir, now)
	if err != nil {
		return err
	}
	out, _ := json.Marshal(map[string]*claudeOAuth{"claudeAiOauth": login})
	return writeReadOnly(dstDir, claudeCredentials, out)
}

// CheckClaudeLogin reports whether srcDir holds a Claude Code subscription login that
// ShareClaudeLogin would share now: nil, or why not (ErrLoginExpired, a missing file, no login
// in it).
func CheckClaudeLogin(srcDir string, now time.Time) error {
	_, err := readClaudeLogin(srcDir, now)
	return err
}

// readClaudeLogin reads the shareable part of srcDir's login and checks its expiry.
func readClaudeLogin(srcDir string, now time.Time) (*claudeOAuth, error) {
	src := filepath.Join(srcDir, claudeCredentials)
	b, err := os.ReadFile(src)
	if err != nil {
		return nil, fmt.Errorf("shared Claude login: %w (run claude there and /login, or unset the shared login)", err)
	}
	var creds struct {
		OAuth *claudeOAuth `json:"claudeAiOauth"`
	}
	if err := json.Unmarshal(b, &creds); err != nil || creds.OAuth == nil || creds.OAuth.AccessToken == "" {
		return nil, fmt.Errorf("shared Claude login: %s holds no subscription login (run claude there and /login)", src)
	}
	if exp := time.UnixMilli(creds.OAuth.ExpiresAt); creds.OAuth.ExpiresAt != 0 && exp.Before(now.Add(loginMargin)) {
		return nil, fmt.Errorf("%w (%s, expires %s): use claude in %s to refresh it", ErrLoginExpired, src, exp.UTC().Format(time.RFC3339), srcDir)
	}
	return creds.OAuth, nil
}

// writeReadOnly replaces dir/name with data, mode 0400, atomically.
func writeReadOnly(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("shared Claude login: %w", err)
	}
	if err := durable.Write(dir, name, data); err != nil {
		return fmt.Errorf("shared Claude login: %w", err)
	}
	if err := os.Chmod(filepath.Join(dir, name), 0o400); err != nil {
		return fmt.Errorf("shared Claude login: %w", err)
	}
	return nil
}
