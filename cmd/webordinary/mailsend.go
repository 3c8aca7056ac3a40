package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/mail"
	"net/smtp"
	"os"
	"strings"
	"time"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/webordinary/webordinary/internal/api"
	"github.com/webordinary/webordinary/internal/demo"
	"github.com/webordinary/webordinary/internal/mail/auth"
)

// Local mail testing: serve --mail-local-testing (SMTP on loopback only) generates a signing
// key into <data>/secrets and publishes it, to its own sender checks only, as the DKIM key of
// selector wo-local of every domain; real DNS is not used for sender checks. `webordinary mail
// send`, on serve's machine, signs with that key, so its mail is authenticated like real mail.
// Having the key is what proves the sender: like the API token, it is readable only where
// serve's data directory is.
const (
	localDKIMFile     = "mail-local-dkim"
	localDKIMSelector = "wo-local"
	// localTestingNotice is shown on the dashboard and at serve's start.
	localTestingNotice = "Local mail testing mode (--mail-local-testing): mail signed by `webordinary mail send` " +
		"on this machine is authenticated, and real DNS is not used for sender checks. Not for real mail."
)

// prepareLocalTesting checks that SMTP listens on loopback only and loads (or creates) the key.
func (m *mailFlags) prepareLocalTesting(data string) error {
	host, _, err := net.SplitHostPort(m.smtpAddr)
	if ip := net.ParseIP(host); err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
		return fmt.Errorf("--mail-local-testing needs --smtp on a loopback address like 127.0.0.1:2525, not %q", m.smtpAddr)
	}
	seed, _, err := loadOrCreateSecret(secretPath(data, localDKIMFile), []byte(base64.StdEncoding.EncodeToString(randomSeed())+"\n"))
	if err != nil {
		return fmt.Errorf("--mail-local-testing: %w", err)
	}
	key, err := parseSeed(seed)
	m.localKey = key
	return err
}

func randomSeed() []byte {
	seed := make([]byte, ed25519.SeedSize)
	_, _ = rand.Read(seed)
	return seed
}

func parseSeed(raw []byte) (ed25519.PrivateKey, error) {
	seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, errors.New("the local mail testing key is damaged: delete it to make a new one")
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// localResolver answers the local testing key for wo-local._domainkey.<any domain> and asks
// base (the DNS fixture, or nothing: every other name does not exist) for the rest.
type localResolver struct {
	auth.Resolver
	record string
}

func (m *mailFlags) localTestingResolver(base auth.Resolver) auth.Resolver {
	if _, ok := base.(auth.NetResolver); ok {
		base = &auth.StaticResolver{}
	}
	pub := base64.StdEncoding.EncodeToString(m.localKey.Public().(ed25519.PublicKey))
	return localResolver{Resolver: base, record: "v=DKIM1; k=ed25519; p=" + pub}
}

// LookupTXT answers the key's record, else base's.
func (r localResolver) LookupTXT(ctx context.Context, name string) ([]string, error) {
	if strings.HasPrefix(strings.ToLower(name), localDKIMSelector+"._domainkey.") {
		return []string{r.record}, nil
	}
	return r.Resolver.LookupTXT(ctx, name)
}

// mailSend is `webordinary mail send`: sign an instruction with the local testing key, ask
// serve how it would route it, and send it over SMTP.
func mailSend(ctx context.Context, args []string) error {
	var (
		cf                      clientFlags
		from, to, subject, addr string
		wait                    bool
	)
	fs := newFlags("mail send", "--from ADDRESS [--wait] INSTRUCTION")
	cf.register(fs)
	fs.StringVar(&from, "from", "", "sender address; a project must list it (project add --sender ADDRESS=USER)")
	fs.StringVar(&to, "to", "edit@edit.localhost", "serve's address (edit@ its --mail-domain); reply to a thread with its reply address")
	fs.StringVar(&subject, "subject", "", "subject (default: the instruction's first line)")
	fs.StringVar(&addr, "smtp", "127.0.0.1:2525", "serve's --smtp address (loopback)")
	fs.BoolVar(&wait, "wait", false, "follow the job to its end; exit status 1 unless done")
	pos, err := parseWith(fs, args, 1)
	if err != nil {
		return err
	}
	if from == "" || len(pos) == 0 {
		return missing("mail send", `webordinary mail send --from owner@example.com "make the header green"`, "--from", "the instruction")
	}
	raw, msgID, err := localMessage(cf.data, from, to, subject, pos[0])
	if err != nil {
		return err
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	if err := wouldRun(ctx, c, raw, from, to); err != nil {
		return err
	}
	if err := smtp.SendMail(addr, nil, from, []string{to}, raw); err != nil {
		return fmt.Errorf("send over SMTP to %s: %w (is serve's --smtp there?)", addr, err)
	}
	say := func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }
	say("sent %s from %s to %s via smtp://%s", msgID, from, to, addr)
	if !wait {
		say("follow it: webordinary status")
		return nil
	}
	return followMail(ctx, c, cf.json, msgID, say)
}

// localMessage composes the instruction as an email and signs it with the local testing key.
func localMessage(data, from, to, subject, instruction string) (raw []byte, msgID string, err error) {
	keyRaw, err := os.ReadFile(secretPath(data, localDKIMFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("no local mail testing key in %s: start serve with --mail-local-testing "+
			"(WO_MAIL_LOCAL_TESTING=true), and run this on its machine with --data (WO_DATA) set to its data directory", data)
	}
	if err != nil {
		return nil, "", err
	}
	key, err := parseSeed(keyRaw)
	if err != nil {
		return nil, "", err
	}
	if subject == "" {
		subject = firstLineOf(instruction, 60)
	}
	msg, err := demo.SampleMessage(from, to, subject, instruction)
	if err != nil {
		return nil, "", err
	}
	parsed, _ := mail.ParseAddress(from)
	_, domain, _ := strings.Cut(parsed.Address, "@")
	var out bytes.Buffer
	err = dkim.Sign(&out, bytes.NewReader(msg), &dkim.SignOptions{Domain: domain, Selector: localDKIMSelector, Signer: key})
	if err != nil {
		return nil, "", err
	}
	m, err := mail.ReadMessage(bytes.NewReader(out.Bytes()))
	if err != nil {
		return nil, "", err
	}
	return out.Bytes(), strings.Trim(m.Header.Get("Message-Id"), "<> "), nil
}

// wouldRun asks serve how it would route the message and refuses to send one it would not run.
func wouldRun(ctx context.Context, c *api.Client, raw []byte, from, to string) error {
	rep, err := c.InspectMail(ctx, api.MailEnvelope{IP: "127.0.0.1", Helo: "localhost", MailFrom: from, Rcpt: to}, raw)
	if err != nil {
		return explain(err)
	}
	if rep.Decision.Action == "run" {
		return nil
	}
	hint := ""
	if rep.Auth != nil && !rep.Auth.Pass {
		hint = "\n(is serve running with --mail-local-testing, and is --data this serve's data directory?)"
	}
	return fmt.Errorf("not sent: serve would %s it: %s%s", rep.Decision.Action, rep.Decision.Reason, hint)
}

// followMail prints the progress of the job the email carries until it ends.
func followMail(ctx context.Context, c *api.Client, asJSON bool, msgID string, say func(string, ...any)) error {
	rec, err := follow(ctx, c, msgID, say)
	if err != nil {
		return explain(err)
	}
	return waitAndPrint(ctx, c, asJSON, rec.Job.ID, time.Minute)
}

// withLocalTesting puts the local testing key in front of cfg's resolver when the mode is on.
func (m *mailFlags) withLocalTesting(cfg auth.Config, err error) (auth.Config, error) {
	if err == nil && m.localTesting {
		cfg.Resolver = m.localTestingResolver(cfg.Resolver)
	}
	return cfg, err
}

// notice is the local testing mode's warning, or "".
func (m *mailFlags) notice() string {
	if !m.localTesting {
		return ""
	}
	return "\n  " + paint("31", "LOCAL MAIL TESTING") + ": " + localTestingNotice
}

// dashboardNotice is what the dashboard shows on every page: the local testing warning, or "".
func (m *mailFlags) dashboardNotice() string {
	if !m.localTesting {
		return ""
	}
	return localTestingNotice
}
