package app

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/webordinary/webordinary/internal/mail/auth"
)

// Local mail testing (Mail.LocalTesting; SMTP on loopback only): serve generates a signing key
// into <Data>/secrets and publishes it, to its own sender checks only, as the DKIM key of
// selector LocalDKIMSelector of every domain; real DNS is not used for sender checks.
// `webordinary mail send`, on serve's machine, signs with that key, so its mail is
// authenticated like real mail. Having the key is what proves the sender: like the API
// token, it is readable only where the data directory is.
const (
	// LocalDKIMFile is the key's file in <Data>/secrets: a base64 ed25519 seed and a newline.
	LocalDKIMFile = "mail-local-dkim"
	// LocalDKIMSelector is the DKIM selector the key is published under.
	LocalDKIMSelector = "wo-local"
	// LocalTestingNotice is shown on the dashboard and at serve's start.
	LocalTestingNotice = "Local mail testing mode (mail.local_testing): mail signed by `webordinary mail send` " +
		"on this machine is authenticated, and real DNS is not used for sender checks. Not for real mail."
)

// validateLocalTesting: local testing accepts only loopback SMTP.
func (m *Mail) validateLocalTesting() error {
	if !m.LocalTesting {
		return nil
	}
	host, _, err := net.SplitHostPort(m.SMTPAddr)
	if ip := net.ParseIP(host); err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
		return fieldErr("Mail.LocalTesting", true, "needs Mail.SMTPAddr on a loopback address like 127.0.0.1:2525, not %q", m.SMTPAddr)
	}
	return nil
}

// ParseLocalKey reads the content of LocalDKIMFile.
func ParseLocalKey(raw []byte) (ed25519.PrivateKey, error) {
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, errors.New("the local mail testing key is damaged: delete it to make a new one")
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// withLocalTesting puts the local testing key in front of the sender checks' resolver
// (loading or creating the key) when the mode is on.
func (a *App) withLocalTesting() error {
	if !a.cfg.Mail.LocalTesting {
		return nil
	}
	seed := make([]byte, ed25519.SeedSize)
	_, _ = rand.Read(seed)
	raw, _, err := loadOrCreateSecret(SecretPath(a.cfg.Data, LocalDKIMFile), []byte(base64.StdEncoding.EncodeToString(seed)+"\n"))
	if err != nil {
		return fmt.Errorf("local mail testing key: %w", err)
	}
	key, err := ParseLocalKey(raw)
	if err != nil {
		return err
	}
	base := a.auth.Resolver
	if _, ok := base.(auth.NetResolver); ok {
		base = &auth.StaticResolver{}
	}
	pub := base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey))
	a.auth.Resolver = localResolver{Resolver: base, record: "v=DKIM1; k=ed25519; p=" + pub}
	return nil
}

// localResolver answers the local testing key for wo-local._domainkey.<any domain> and asks
// the base resolver (the DNS fixture, or nothing: every other name does not exist) for the rest.
type localResolver struct {
	auth.Resolver
	record string
}

// LookupTXT answers the key's record, else the base resolver's.
func (r localResolver) LookupTXT(ctx context.Context, name string) ([]string, error) {
	if strings.HasPrefix(strings.ToLower(name), LocalDKIMSelector+"._domainkey.") {
		return []string{r.record}, nil
	}
	return r.Resolver.LookupTXT(ctx, name)
}

// notice is the dashboard's notice: the local testing warning, or "".
func (c *Config) notice() string {
	if !c.Mail.LocalTesting {
		return ""
	}
	return LocalTestingNotice
}
