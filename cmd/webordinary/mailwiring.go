package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"

	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/dashboard"
	"github.com/webordinary/webordinary/internal/mail/auth"
	"github.com/webordinary/webordinary/internal/mail/inbound"
	"github.com/webordinary/webordinary/internal/mail/intake"
	"github.com/webordinary/webordinary/internal/mail/message"
	"github.com/webordinary/webordinary/internal/mail/outbox"
	"github.com/webordinary/webordinary/internal/metrics"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/router"
)

// mailFlags configure mail in and out for serve.
type mailFlags struct {
	smtpAddr, domains, local, secret, trustedAuthServ, dnsFixture string
	tlsCert, tlsKey                                               string
	relay, relayUser, relayPassword, relayTLS                     string
	maxBytes                                                      int64
	perSender, perTenant                                          int
	parse                                                         message.Limits
	localTesting                                                  bool
	localKey                                                      ed25519.PrivateKey
}

func (m *mailFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&m.smtpAddr, "smtp", "127.0.0.1:2525", "SMTP listener for instructions by email; empty = no mail")
	fs.StringVar(&m.domains, "mail-domain", "edit.localhost", "domain(s) we receive mail for, comma-separated; the first is used in our addresses")
	fs.StringVar(&m.local, "mail-local", "edit", "local part of our address (edit@<domain>)")
	fs.StringVar(&m.secret, "mail-secret", "", "secret that signs reply tokens (default: generated once into <data>/mail-secret)")
	fs.StringVar(&m.trustedAuthServ, "mail-trusted-authserv", "", "behind a relay (SES, Postfix): trust only its Authentication-Results with this authserv-id")
	fs.StringVar(&m.dnsFixture, "mail-dns-fixture", "", "JSON file of DNS records used instead of real DNS for sender checks (tests, offline demos)")
	fs.StringVar(&m.tlsCert, "smtp-tls-cert", "", "certificate file: offer STARTTLS")
	fs.StringVar(&m.tlsKey, "smtp-tls-key", "", "key file for --smtp-tls-cert")
	fs.Int64Var(&m.maxBytes, "smtp-max-bytes", 25<<20, "largest message accepted")
	fs.StringVar(&m.relay, "smtp-relay", "", "host:port of the SMTP relay replies go through (default: .eml files in <data>/outbox)")
	fs.StringVar(&m.relayUser, "smtp-relay-user", "", "relay user")
	fs.StringVar(&m.relayPassword, "smtp-relay-password", "", "relay password")
	fs.StringVar(&m.relayTLS, "smtp-relay-tls", "starttls", "relay TLS: starttls, opportunistic, tls or none")
	fs.IntVar(&m.perSender, "mail-per-sender", 30, "instructions per sender per hour")
	fs.IntVar(&m.perTenant, "mail-per-tenant", 60, "instructions per project+user per hour")
	fs.IntVar(&m.parse.MaxDepth, "mail-max-depth", message.DefaultMaxDepth, "deepest MIME nesting parsed; deeper mail is quarantined")
	fs.DurationVar(&m.parse.Timeout, "mail-parse-timeout", message.DefaultTimeout, "time budget to parse one message; slower mail is quarantined")
	fs.BoolVar(&m.localTesting, "mail-local-testing", false, "local testing: accept mail from `webordinary mail send` on this machine as authenticated; needs --smtp on loopback; no real DNS for sender checks")
}

// mail is the running mail front end.
type mailParts struct {
	in     *inbound.Inbound
	smtp   *intake.Server
	outbox *outbox.Outbox
	notice string
}

func (m *mailFlags) domainList() []string {
	var out []string
	for _, d := range strings.Split(m.domains, ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, d)
		}
	}
	return out
}

// build sets up the inbound router and the outbox (and, with --smtp, the listener).
func (m *mailFlags) build(ctx context.Context, data string, b *broker.Backend, r *router.Router, jobURL func(string) string, log *slog.Logger) (*mailParts, error) {
	secret, err := m.loadSecret(data)
	if err != nil {
		return nil, err
	}
	if m.localTesting {
		if err := m.prepareLocalTesting(data); err != nil {
			return nil, err
		}
	}
	ob, err := m.openOutbox(data, log)
	if err != nil {
		return nil, err
	}
	in, err := newInbound(ctx, b, r, inbound.Config{Domains: m.domainList(), Local: m.local, Secret: secret,
		Outbox: ob, PerSender: m.perSender, PerTenant: m.perTenant, Limits: m.parse, JobURL: jobURL, Logger: log}, m)
	if err != nil {
		return nil, err
	}
	parts := &mailParts{in: in, outbox: ob, notice: m.notice()}
	if m.smtpAddr == "" {
		return parts, nil
	}
	cfg := intake.Config{Addr: m.smtpAddr, Domains: m.domainList(), MaxBytes: m.maxBytes,
		Spool: filepath.Join(data, "mail-spool"), Handler: in.Handle, Logger: log}
	if cfg.TLS, err = m.tls(); err != nil {
		return nil, err
	}
	parts.smtp, err = intake.New(cfg)
	return parts, err
}

func newInbound(ctx context.Context, b *broker.Backend, r *router.Router, cfg inbound.Config, m *mailFlags) (*inbound.Inbound, error) {
	var err error
	if cfg.Projects, err = project.Open(ctx, b); err != nil {
		return nil, err
	}
	if cfg.Threads, err = project.OpenThreads(ctx, b); err != nil {
		return nil, err
	}
	if cfg.Mail, err = b.Table(ctx, "mail"); err != nil {
		return nil, err
	}
	if cfg.Auth, err = m.authConfig(); err != nil {
		return nil, err
	}
	cfg.Jobs, cfg.Router = b.Jobs, r
	return inbound.New(cfg)
}

func (m *mailFlags) authConfig() (auth.Config, error) {
	cfg := auth.Config{TrustedAuthServID: m.trustedAuthServ, Resolver: auth.NetResolver{}}
	if m.dnsFixture == "" {
		return m.withLocalTesting(cfg, nil)
	}
	f, err := os.Open(m.dnsFixture)
	if err != nil {
		return cfg, fmt.Errorf("--mail-dns-fixture: %w", err)
	}
	defer f.Close()
	cfg.Resolver, err = auth.LoadStaticResolver(f)
	return m.withLocalTesting(cfg, err)
}

func (m *mailFlags) loadSecret(data string) ([]byte, error) {
	if m.secret != "" {
		return []byte(m.secret), nil
	}
	path := filepath.Join(data, "mail-secret")
	if s, err := os.ReadFile(path); err == nil && len(s) >= 32 {
		return s, nil
	}
	buf := make([]byte, 32)
	_, _ = rand.Read(buf)
	secret := []byte(hex.EncodeToString(buf))
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, secret, 0o600); err != nil {
		return nil, fmt.Errorf("write %s: %w (or set --mail-secret)", path, err)
	}
	return secret, nil
}

func (m *mailFlags) openOutbox(data string, log *slog.Logger) (*outbox.Outbox, error) {
	var sender outbox.Sender = outbox.Dir{Path: filepath.Join(data, "outbox")}
	if m.relay != "" {
		host, portS, err := net.SplitHostPort(m.relay)
		if err != nil {
			return nil, fmt.Errorf("--smtp-relay %q: %w (use host:port)", m.relay, err)
		}
		port, _ := strconv.Atoi(portS)
		if sender, err = outbox.NewSMTP(outbox.SMTPConfig{Host: host, Port: port, Username: m.relayUser,
			Password: m.relayPassword, TLS: m.relayTLS}); err != nil {
			return nil, err
		}
	}
	return outbox.Open(outbox.Config{Dir: filepath.Join(data, "mail-outbox"), Sender: sender, Logger: log})
}

func (m *mailFlags) tls() (*tls.Config, error) {
	if m.tlsCert == "" && m.tlsKey == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(m.tlsCert, m.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("--smtp-tls-cert/--smtp-tls-key: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

func (p *mailParts) describe(data string) string {
	if p.smtp == nil {
		return "no SMTP listener (--smtp '')"
	}
	return fmt.Sprintf("smtp://%s for %s (replies: %s)%s", p.smtp.Addr(), p.in.Address(), "see --smtp-relay; default .eml files in "+filepath.Join(data, "outbox"), p.notice)
}

// quarantine is the SMTP intake's quarantine, nil without a listener.
func (p *mailParts) quarantine() dashboard.Quarantine {
	if p.smtp == nil {
		return nil
	}
	return p.smtp
}

// registerMetrics exposes the outbox's counts (once per process).
func (p *mailParts) registerMetrics() {
	stat := func(f func(outbox.Stats) float64) func() float64 {
		return func() float64 { return f(p.outbox.Stats()) }
	}
	_ = metrics.Registry.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "webordinary_mail_out_sent_total",
		Help: "Replies delivered to the relay or the outbox directory since start."}, stat(func(s outbox.Stats) float64 { return float64(s.Sent) })))
	_ = metrics.Registry.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "webordinary_mail_out_failed",
		Help: "Replies parked as undeliverable."}, stat(func(s outbox.Stats) float64 { return float64(s.Failed) })))
	_ = metrics.Registry.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "webordinary_mail_out_queued",
		Help: "Replies waiting to be sent (including retries)."}, stat(func(s outbox.Stats) float64 { return float64(s.Queued + s.Retrying) })))
}
