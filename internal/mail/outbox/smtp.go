package outbox

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"slices"
	"sync"
	"time"

	gomail "github.com/wneessen/go-mail"
	gosmtp "github.com/wneessen/go-mail/smtp"
)

// SMTPConfig configures the SMTP relay sender.
type SMTPConfig struct {
	// Host is the relay's host name (also the name its certificate must carry). Required.
	Host string
	// Port defaults to 465 for TLS "tls" and 587 otherwise.
	Port int
	// Username and Password enable SMTP AUTH (PLAIN, else LOGIN) when Username is set. The
	// credentials are only sent over TLS, or in the clear to localhost.
	Username, Password string
	// TLS is "starttls" (default: STARTTLS is required), "opportunistic" (STARTTLS if offered),
	// "tls" (implicit TLS, usually port 465) or "none".
	TLS string
	// InsecureSkipVerify accepts any server certificate. For tests only.
	InsecureSkipVerify bool
	// HeloName is the name sent with EHLO; defaults to the host name.
	HeloName string
	// Timeout bounds the connection and each SMTP command. Default 30s.
	Timeout time.Duration
}

// The TLS modes of SMTPConfig.
const (
	TLSStartTLS      = "starttls"
	TLSOpportunistic = "opportunistic"
	TLSImplicit      = "tls"
	TLSNone          = "none"
)

func (c SMTPConfig) withDefaults() SMTPConfig {
	if c.TLS == "" {
		c.TLS = TLSStartTLS
	}
	if c.Port == 0 {
		c.Port = 587
		if c.TLS == TLSImplicit {
			c.Port = 465
		}
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
	return c
}

func (c SMTPConfig) validate() error {
	switch {
	case c.Host == "":
		return errors.New("smtp: Host is required")
	case c.Port < 1 || c.Port > 65535:
		return fmt.Errorf("smtp: Port %d is out of range 1-65535", c.Port)
	case !slices.Contains([]string{TLSStartTLS, TLSOpportunistic, TLSImplicit, TLSNone}, c.TLS):
		return fmt.Errorf("smtp: TLS %q is not one of starttls, opportunistic, tls, none", c.TLS)
	case c.Timeout < 0:
		return errors.New("smtp: Timeout must not be negative")
	}
	return nil
}

// smtpSender relays messages through one SMTP server, one connection per message.
type smtpSender struct {
	cfg SMTPConfig
	tls *tls.Config
}

var _ Sender = (*smtpSender)(nil)

// NewSMTP returns a Sender that relays through an SMTP server with go-mail's client. Each Send
// opens a connection (TLS and AUTH as configured), sends the bytes unchanged and quits. A 5xx
// reply to MAIL, RCPT or DATA is permanent; everything else, including failing to connect,
// negotiate TLS or authenticate (operator trouble that must not discard mail), is temporary.
func NewSMTP(cfg SMTPConfig) (Sender, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &smtpSender{cfg: cfg, tls: &tls.Config{
		ServerName:         cfg.Host,
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: cfg.InsecureSkipVerify, //nolint:gosec // documented as tests only
	}}
	if _, err := s.client(&connDialer{}); err != nil { // fail fast on bad options
		return nil, fmt.Errorf("smtp: %w", err)
	}
	return s, nil
}

// client builds a go-mail client for one connection made through d.
func (s *smtpSender) client(d *connDialer) (*gomail.Client, error) {
	opts := []gomail.Option{
		gomail.WithPort(s.cfg.Port),
		gomail.WithTimeout(s.cfg.Timeout),
		gomail.WithTLSConfig(s.tls),
		gomail.WithTLSPolicy(tlsPolicy(s.cfg.TLS)),
		gomail.WithDialContextFunc(d.dial),
	}
	if s.cfg.TLS == TLSImplicit {
		d.tls = s.tls
	}
	if s.cfg.HeloName != "" {
		opts = append(opts, gomail.WithHELO(s.cfg.HeloName))
	}
	if s.cfg.Username != "" {
		opts = append(opts, gomail.WithSMTPAuthCustom(&plainOrLogin{user: s.cfg.Username, pass: s.cfg.Password, host: s.cfg.Host}))
	}
	return gomail.NewClient(s.cfg.Host, opts...)
}

func tlsPolicy(mode string) gomail.TLSPolicy {
	switch mode {
	case TLSStartTLS:
		return gomail.TLSMandatory
	case TLSOpportunistic:
		return gomail.TLSOpportunistic
	default: // implicit TLS is done by the dialer; none is none
		return gomail.NoTLS
	}
}

// Send delivers msg in one SMTP transaction.
func (s *smtpSender) Send(ctx context.Context, from string, to []string, msg []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d := &connDialer{}
	defer d.close()
	stop := context.AfterFunc(ctx, d.close) // unblock a command stuck on the network
	defer stop()
	c, err := s.client(d)
	if err != nil {
		return temporary("smtp client", err)
	}
	conn, err := c.DialToSMTPClientWithContext(ctx)
	if err != nil {
		return classify(ctx, "connect", err, false)
	}
	if err := transact(conn, from, to, msg); err != nil {
		return classify(ctx, "send", err, true)
	}
	_ = conn.Quit() // the message is accepted; a failing QUIT changes nothing
	return nil
}

// transact runs MAIL, RCPT for each recipient, and DATA.
func transact(c *gosmtp.Client, from string, to []string, msg []byte) error {
	if len(to) == 0 {
		return errNoRecipients
	}
	if err := c.Mail(from); err != nil {
		return fmt.Errorf("mail from: %w", err)
	}
	for _, rcpt := range to {
		if err := c.Rcpt(rcpt); err != nil {
			return fmt.Errorf("rcpt to %s: %w", rcpt, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	return nil
}

// errNoRecipients is returned for a message with an empty envelope recipient list.
var errNoRecipients = errors.New("no recipients")

// classify maps a failure onto ErrPermanent or ErrTemporary. Only 5xx replies during the mail
// transaction are permanent, as is a message without recipients.
func classify(ctx context.Context, what string, err error, inTransaction bool) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var reply *textproto.Error
	if inTransaction && (errors.As(err, &reply) && reply.Code >= 500 || errors.Is(err, errNoRecipients)) {
		return permanent("smtp "+what, err)
	}
	return temporary("smtp "+what, err)
}

// connDialer dials the connection of one Send, doing implicit TLS if set, and remembers it so
// Send can close it however the exchange ends (go-mail leaves it open on some errors).
type connDialer struct {
	tls  *tls.Config
	mu   sync.Mutex
	conn net.Conn
}

func (d *connDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	nd := &net.Dialer{}
	var conn net.Conn
	var err error
	if d.tls != nil {
		conn, err = (&tls.Dialer{NetDialer: nd, Config: d.tls}).DialContext(ctx, network, addr)
	} else {
		conn, err = nd.DialContext(ctx, network, addr)
	}
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.conn = conn
	return conn, nil
}

// close closes the connection if one was made; safe to call more than once.
func (d *connDialer) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conn != nil {
		_ = d.conn.Close()
	}
}

// plainOrLogin authenticates with PLAIN when the server offers it, else with LOGIN. Both refuse
// to send credentials over an unencrypted connection to anything but localhost. It holds the
// chosen mechanism, so each connection needs its own.
type plainOrLogin struct {
	user, pass, host string
	chosen           gosmtp.Auth
}

// Start implements gosmtp.Auth.
func (a *plainOrLogin) Start(server *gosmtp.ServerInfo) (string, []byte, error) {
	a.chosen = gosmtp.PlainAuth("", a.user, a.pass, a.host, false)
	if !slices.Contains(server.Auth, "PLAIN") && slices.Contains(server.Auth, "LOGIN") {
		a.chosen = gosmtp.LoginAuth(a.user, a.pass, a.host, false)
	}
	return a.chosen.Start(server)
}

// Next implements gosmtp.Auth.
func (a *plainOrLogin) Next(fromServer []byte, more bool) ([]byte, error) {
	return a.chosen.Next(fromServer, more)
}
