// Package intake is webordinary's SMTP listener. A message is written to the spool and
// fsync'd before the server answers 250, then handed to the router asynchronously, in
// arrival order; a crash between the 250 and the handling loses nothing (the spool is
// handled again at start). Recipients outside the configured domains are refused at RCPT,
// oversize messages at DATA (552), and STARTTLS is offered when a certificate is configured.
// A message the handler can never handle is set aside in the quarantine (ErrQuarantine); one
// it may not run now (its sender is over a limit) is held (ErrHold, Held) until an operator
// releases or drops it. Neither holds back the messages after it.
package intake

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/emersion/go-smtp"
)

// Envelope is what the SMTP session knew about a message.
type Envelope struct {
	RemoteIP   string    `json:"remoteIp"`
	Helo       string    `json:"helo"`
	MailFrom   string    `json:"mailFrom"`
	Rcpt       []string  `json:"rcpt"`
	TLS        bool      `json:"tls"`
	ReceivedAt time.Time `json:"receivedAt"`
	// NullSender is true for MAIL FROM:<> (MailFrom is then ""): a bounce or other automatic
	// message, which must never be answered (RFC 5321 §4.5.5).
	NullSender bool `json:"nullSender,omitempty"`
	// Released is true for a held message an operator released (Held.Release): the limit
	// that held it does not apply again.
	Released bool `json:"released,omitempty"`
	// FromRelay is true when the client connected from one of Config.TrustedRelays: only then
	// may the relay's Authentication-Results be trusted (auth.Envelope.FromRelay).
	FromRelay bool `json:"fromRelay,omitempty"`
}

// Handler processes one accepted message. A nil error removes it from the spool; an error
// wrapping ErrQuarantine sets it aside in the quarantine; one wrapping ErrHold holds it (see
// Held); any other error keeps it for another
// try, holding back the later messages (the handler must be idempotent: it may see a message
// twice). The handler must return soon after ctx ends: Run waits for it.
type Handler func(ctx context.Context, env Envelope, raw []byte) error

// Defaults of Config's fields.
const (
	DefaultAddr     = "127.0.0.1:2525"
	DefaultMaxBytes = 25 << 20
)

// Config configures the listener.
type Config struct {
	// Addr to listen on. Default DefaultAddr.
	Addr string
	// Listener, when set, is accepted on instead of listening on Addr (the caller bound it,
	// so that every address is taken before anything starts). Run closes it.
	Listener net.Listener
	// Domains we accept mail for (the part after @ of a recipient). Required.
	Domains []string
	// MaxBytes bounds a message. Default 25 MB.
	MaxBytes int64
	// Spool is the directory accepted messages are kept in until handled. Required.
	Spool string
	// TrustedRelays are the addresses of the relay in front of us (Postfix, a filter) whose
	// Authentication-Results are trusted: Envelope.FromRelay is set for their connections
	// and for no other's. Empty: no client is the relay.
	TrustedRelays Relays
	// TLS enables STARTTLS.
	TLS *tls.Config
	// Hostname is announced in the greeting. Default "localhost".
	Hostname string
	// Handler processes accepted messages. Required.
	Handler Handler
	// RetryEvery is how often a message whose handling failed is tried again. Default 30s.
	RetryEvery time.Duration
	Logger     *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Hostname == "" {
		c.Hostname = "localhost"
	}
	if c.RetryEvery == 0 {
		c.RetryEvery = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	for i, d := range c.Domains {
		c.Domains[i] = strings.ToLower(strings.TrimSpace(d))
	}
	return c
}

func (c Config) validate() error {
	switch {
	case len(c.Domains) == 0:
		return errors.New("intake: no mail domain configured (Config.Domains, e.g. edit.example.com)")
	case c.Spool == "":
		return errors.New("intake: no spool directory")
	case c.Handler == nil:
		return errors.New("intake: no handler")
	}
	return nil
}

// Server is the SMTP listener plus the spool's handling loop.
type Server struct {
	cfg   Config
	spool *spool
	smtp  *smtp.Server
	ln    net.Listener
	wake  chan struct{}
}

// New validates cfg, opens the spool and starts listening (on Config.Listener when set).
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	sp, err := openSpool(cfg.Spool)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, spool: sp, wake: make(chan struct{}, 1)}
	s.smtp = s.newSMTP()
	if s.ln = cfg.Listener; s.ln != nil {
		return s, nil
	}
	if s.ln, err = net.Listen("tcp", cfg.Addr); err != nil {
		return nil, fmt.Errorf("intake: listen %s: %w (pick another address)", cfg.Addr, err)
	}
	return s, nil
}

func (s *Server) newSMTP() *smtp.Server {
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &session{s: s, env: s.envelopeOf(c)}, nil
	}))
	srv.Domain = s.cfg.Hostname
	srv.MaxMessageBytes = s.cfg.MaxBytes
	srv.MaxRecipients = 50
	srv.ReadTimeout, srv.WriteTimeout = 5*time.Minute, time.Minute
	srv.TLSConfig = s.cfg.TLS
	return srv
}

func (s *Server) envelopeOf(c *smtp.Conn) Envelope {
	env := Envelope{Helo: c.Hostname()}
	if addr, ok := c.Conn().RemoteAddr().(*net.TCPAddr); ok {
		env.RemoteIP = addr.IP.String()
		env.FromRelay = s.cfg.TrustedRelays.Contains(env.RemoteIP)
	}
	_, env.TLS = c.TLSConnectionState()
	return env
}

// Addr is the listening address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Run serves SMTP and handles the spool until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		_ = s.smtp.Close()
	}()
	hctx, stop := context.WithCancel(ctx)
	handled := make(chan struct{})
	go func() { defer close(handled); s.handleLoop(hctx) }()
	err := s.smtp.Serve(s.ln)
	stop()
	<-handled // the spool is not touched after Run returns
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func (s *Server) accepted() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// handleLoop hands spooled messages to the handler, oldest first; a message whose handling
// fails (temporarily) holds back the ones after it, so instructions keep their order.
func (s *Server) handleLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.RetryEvery)
	defer t.Stop()
	for {
		s.drain(ctx)
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-t.C:
		}
	}
}

func (s *Server) drain(ctx context.Context) {
	ids, err := s.spool.pending()
	if err != nil {
		s.cfg.Logger.ErrorContext(ctx, "read mail spool", slog.Any("err", err))
		return
	}
	for _, id := range ids {
		if ctx.Err() != nil || !s.handleOne(ctx, id) {
			return // keep arrival order: later messages wait for the one that failed
		}
	}
}

// handleOne hands one spooled message to the handler; false means it failed and stays (and
// holds back the later ones). A message the handler rejects for good (ErrQuarantine) and an
// unreadable entry are set aside instead, so they never hold back the rest.
func (s *Server) handleOne(ctx context.Context, id string) bool {
	env, raw, err := s.spool.read(id)
	if err != nil {
		return s.setAside(ctx, id, "unreadable", "unreadable spool entry: "+err.Error())
	}
	err = s.cfg.Handler(ctx, env, raw)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return false // stopping: handled again at the next start
	case errors.Is(err, ErrQuarantine):
		return s.setAside(ctx, id, "rejected", err.Error())
	case errors.Is(err, ErrHold):
		return s.hold(ctx, id, err.Error())
	default:
		s.cfg.Logger.WarnContext(ctx, "mail handling failed; will retry", slog.String("spool", id), slog.Any("err", err))
		return false
	}
	if err := s.spool.done(id); err != nil {
		s.cfg.Logger.ErrorContext(ctx, "remove handled mail from spool", slog.Any("err", err))
	}
	return true
}

// session is one SMTP conversation.
type session struct {
	s   *Server
	env Envelope
}

func (ss *session) Reset()        { ss.env.MailFrom, ss.env.NullSender, ss.env.Rcpt = "", false, nil }
func (ss *session) Logout() error { return nil }

func (ss *session) Mail(from string, _ *smtp.MailOptions) error {
	ss.env.MailFrom, ss.env.NullSender = from, from == ""
	return nil
}

func (ss *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	_, domain, ok := strings.Cut(strings.ToLower(to), "@")
	for _, d := range ss.s.cfg.Domains {
		if ok && domain == d {
			ss.env.Rcpt = append(ss.env.Rcpt, to)
			return nil
		}
	}
	return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1},
		Message: "we only accept mail for " + strings.Join(ss.s.cfg.Domains, ", ")}
}

// Data spools the message durably before the 250.
func (ss *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err // go-smtp reports an oversize message as 552 itself
	}
	env := ss.env
	env.ReceivedAt = time.Now().UTC()
	if _, err := ss.s.spool.write(env, raw); err != nil {
		ss.s.cfg.Logger.Error("spool mail", slog.Any("err", err))
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "could not store the message; try again later"}
	}
	ss.s.accepted()
	return nil
}
