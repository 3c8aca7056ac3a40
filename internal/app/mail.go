package app

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/mem"
	"github.com/webordinary/webordinary/internal/broker/natsjs"
	"github.com/webordinary/webordinary/internal/dashboard"
	"github.com/webordinary/webordinary/internal/mail/auth"
	"github.com/webordinary/webordinary/internal/mail/inbound"
	"github.com/webordinary/webordinary/internal/mail/intake"
	"github.com/webordinary/webordinary/internal/mail/outbox"
	"github.com/webordinary/webordinary/internal/mail/sesin"
	"github.com/webordinary/webordinary/internal/metrics"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/retry"
	"github.com/webordinary/webordinary/internal/router"
)

// mailParts are serve's mail components.
type mailParts struct {
	in     *inbound.Inbound
	smtp   *intake.Server  // nil without Mail.SMTPAddr
	ses    *sesin.Consumer // nil without Mail.SESQueue
	outbox *outbox.Outbox
	relays intake.Relays // Mail.TrustedRelays
}

// loadMailFiles reads the files Mail names (STARTTLS certificate, DNS fixture), so a bad one
// fails before anything binds.
func (a *App) loadMailFiles() error {
	m := a.cfg.Mail
	if m.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(m.TLSCert, m.TLSKey)
		if err != nil {
			return &FieldError{Field: "Mail.TLSCert", Value: m.TLSCert, Err: err}
		}
		a.smtpTLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	a.auth = auth.Config{TrustedAuthServID: m.TrustedAuthServ, Resolver: auth.NetResolver{}}
	if m.DNSFixture == "" {
		return nil
	}
	f, err := os.Open(m.DNSFixture)
	if err != nil {
		return &FieldError{Field: "Mail.DNSFixture", Value: m.DNSFixture, Err: err}
	}
	defer f.Close()
	if a.auth.Resolver, err = auth.LoadStaticResolver(f); err != nil {
		return &FieldError{Field: "Mail.DNSFixture", Value: m.DNSFixture, Err: err}
	}
	return nil
}

// buildMail sets up the inbound router, the outbox and, with a bound SMTP listener, intake.
// base is the HTTP server's public address: job pages and publish links live under it.
func (a *App) buildMail(ctx context.Context, b *broker.Backend, r *router.Router, base string) (*mailParts, error) {
	m, data := a.cfg.Mail, a.cfg.Data
	// A serve that starts with the members of an embedded cluster may ask before the engine
	// has elected its leaders ("no responders"): ask again for a while, as the worker does.
	var secret []byte
	wctx, cancel := context.WithTimeout(ctx, engineAnswerWait)
	defer cancel()
	err := retry.Do(wctx, func(ctx context.Context) (err error) {
		secret, err = loadMailSecret(ctx, b, m.Secret, data)
		return err
	}, nil, func(err error) {
		a.log.WarnContext(ctx, "reply-token secret: the engine does not answer yet; asking again", slog.Any("err", err))
	})
	if err != nil {
		return nil, err
	}
	if err := a.withLocalTesting(); err != nil {
		return nil, err
	}
	var in *inbound.Inbound // SES's Message-IDs are recorded through it, once it exists
	ob, err := a.openOutbox(ctx, b, func(ctx context.Context, msg []byte, id string) error { return in.RecordSent(ctx, msg, id) })
	if err != nil {
		return nil, err
	}
	in, err = a.newInbound(ctx, b, r, inbound.Config{Domains: m.Domains, Local: m.Local, Secret: secret,
		Outbox: ob, PerSender: m.PerSender, PerTenant: m.PerTenant, HeldNoticeAfter: m.HeldNoticeAfter, Limits: m.Parse,
		Pictures: a.pictureFunc(), Shots: a.pictures(), Logger: a.log,
		LinkBase: func() string { return base }})
	if err != nil {
		return nil, err
	}
	parts := &mailParts{in: in, outbox: ob, relays: m.relays()}
	if err := a.checkLoopbackRelay(parts.relays); err != nil {
		return nil, err
	}
	if m.SESQueue != "" {
		if parts.ses, err = a.sesInbound(ctx, in.Handle); err != nil {
			return nil, err
		}
	}
	if a.ln.smtp == nil {
		return parts, nil
	}
	parts.smtp, err = intake.New(intake.Config{Listener: a.ln.smtp, Addr: m.SMTPAddr, Domains: m.Domains, MaxBytes: m.MaxBytes,
		Spool: filepath.Join(data, "mail-spool"), TLS: a.smtpTLS, TrustedRelays: parts.relays, Handler: in.Handle, Logger: a.log})
	return parts, err
}

func (a *App) newInbound(ctx context.Context, b *broker.Backend, r *router.Router, cfg inbound.Config) (*inbound.Inbound, error) {
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
	if cfg.Notices, err = b.Table(ctx, "held"); err != nil {
		return nil, err
	}
	cfg.Auth, cfg.Jobs, cfg.Router = a.auth, b.Jobs, r
	return inbound.New(cfg)
}

// The secret that signs reply tokens is kept in the engine's table secretsTable under
// mailSecretKey, not on serve's disk: a serve restarted on a new disk (a new Fargate task, a
// new machine) still opens the tokens the previous one handed out.
const (
	secretsTable  = "secrets"
	mailSecretKey = "mail"
)

// loadMailSecret is secret, else the engine's. The first serve without one stores the data
// directory's mail-secret file, where serve kept it before, else a fresh secret; serves
// starting together agree on the one stored first.
// engineAnswerWait bounds how long start-up asks an engine that does not answer yet (a
// cluster electing its leaders, each raft group in seconds).
const engineAnswerWait = time.Minute

func loadMailSecret(ctx context.Context, b *broker.Backend, secret, data string) ([]byte, error) {
	if secret != "" {
		return []byte(secret), nil
	}
	tb, err := b.Table(ctx, secretsTable)
	if err != nil {
		return nil, fmt.Errorf("open the engine's secrets table: %w", err)
	}
	stored, _, err := tb.Get(ctx, mailSecretKey)
	if err == nil {
		return stored, nil
	}
	if !errors.Is(err, broker.ErrNotFound) {
		return nil, fmt.Errorf("read the reply-token secret from the engine: %w (or set Mail.Secret)", err)
	}
	fresh := legacyMailSecret(data)
	if _, err := tb.Create(ctx, mailSecretKey, fresh); errors.Is(err, broker.ErrExists) {
		stored, _, err = tb.Get(ctx, mailSecretKey)
		return stored, err
	} else if err != nil {
		return nil, fmt.Errorf("store the reply-token secret in the engine: %w (or set Mail.Secret)", err)
	}
	return fresh, nil
}

// legacyMailSecret is the secret an older serve kept in data/mail-secret, so the tokens it
// handed out keep working; else a fresh one.
func legacyMailSecret(data string) []byte {
	if s, err := os.ReadFile(filepath.Join(data, "mail-secret")); err == nil && len(s) >= 32 {
		return s
	}
	buf := make([]byte, 32)
	_, _ = rand.Read(buf)
	return []byte(hex.EncodeToString(buf))
}

// openOutbox opens the outbox with its sender: SES (sesSent records SES's Message-IDs), the
// relay, else the outbox directory. Where it keeps what it must send follows from the
// engine: see outboxStore.
func (a *App) openOutbox(ctx context.Context, b *broker.Backend, sesSent func(ctx context.Context, msg []byte, id string) error) (*outbox.Outbox, error) {
	m := a.cfg.Mail
	var sender outbox.Sender = outbox.Dir{Path: filepath.Join(a.cfg.Data, "outbox")}
	if m.SES {
		s, err := a.sesSender(ctx, sesSent)
		if err != nil {
			return nil, err
		}
		sender = s
	}
	if m.Relay != "" {
		host, portS, _ := net.SplitHostPort(m.Relay) // checked by Validate
		port, _ := strconv.Atoi(portS)
		s, err := outbox.NewSMTP(outbox.SMTPConfig{Host: host, Port: port, Username: m.RelayUser,
			Password: m.RelayPassword, TLS: m.RelayTLS})
		if err != nil {
			return nil, &FieldError{Field: "Mail.Relay", Value: m.Relay, Err: err}
		}
		sender = s
	}
	cfg := outbox.Config{Sender: sender, Logger: a.log}
	if err := a.outboxStore(ctx, b, &cfg); err != nil {
		return nil, err
	}
	return outbox.Open(cfg)
}

// outboxStore sets where the outbox keeps the replies it has yet to send and its memory of
// those it sent. An engine shared beyond this process (NATS servers, an embedded cluster of
// serves, AWS's DynamoDB and S3) keeps them: they outlive serve and its disk (a Fargate task's
// is new at every start), and every serve on the engine sends each reply once. A lone engine
// in this process (embedded:// without a cluster, mem://) lives and dies with the data
// directory, so the spool <Data>/mail-outbox does too.
func (a *App) outboxStore(ctx context.Context, b *broker.Backend, cfg *outbox.Config) error {
	lone := a.cfg.embedded() && !natsjs.EmbeddedCluster(a.cfg.Engine)
	cfg.Dir = filepath.Join(a.cfg.Data, "mail-outbox") // on an engine: what an older serve left there moves in
	if lone || strings.HasPrefix(a.cfg.Engine, mem.Scheme+"://") {
		return nil
	}
	e, err := outbox.OpenEngine(ctx, b)
	if err != nil {
		return fmt.Errorf("keep the reply outbox in the engine: %w", err)
	}
	cfg.Engine = e
	return nil
}

func (p *mailParts) describe(data string, m Mail) string {
	if p.ses != nil || m.SES {
		return m.describeSES()
	}
	if p.smtp == nil {
		return "no SMTP listener"
	}
	return fmt.Sprintf("smtp://%s for %s (replies: through the relay if one is set, else .eml files in %s)",
		p.smtp.Addr(), p.in.Address(), filepath.Join(data, "outbox"))
}

// describeMail is the banner's mail line, with the local testing warning when it is on.
func (a *App) describeMail(p *mailParts) string {
	if a.cfg.Mail.LocalTesting {
		return p.describe(a.cfg.Data, a.cfg.Mail) + "\n  LOCAL MAIL TESTING: " + LocalTestingNotice
	}
	return p.describe(a.cfg.Data, a.cfg.Mail)
}

// quarantine is the SMTP intake's quarantine, nil without a listener.
func (p *mailParts) quarantine() dashboard.Quarantine {
	if p.smtp == nil {
		return nil
	}
	return p.smtp
}

// held is the SMTP intake's held mail, nil without a listener.
func (p *mailParts) held() *intake.Held {
	if p.smtp == nil {
		return nil
	}
	return p.smtp.Held()
}

// registerMetrics exposes the outbox's counts (once per process: a second App's are ignored).
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

// pictureFunc reads a job's reply pictures from the shots store; nil without one.
func (a *App) pictureFunc() func(string) []outbox.Image {
	if p := a.pictures(); p != nil {
		return p.Images
	}
	return nil
}
