package outbox

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log"
	"log/slog"
	"math/big"
	"mime"
	"mime/multipart"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// fakeClock is a settable clock for Config.Now.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// testLogger routes logs to t.Log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// waitFor polls cond until it holds, failing the test after 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sinkOptions script the test SMTP server.
type sinkOptions struct {
	starttls    bool // offer STARTTLS with a self-signed certificate
	implicitTLS bool // speak TLS from the first byte
	auth        bool // require AUTH PLAIN as user/secret (only offered over TLS)
	// rcpt and data, when set, answer the n-th RCPT or DATA (1-based); nil accepts.
	rcpt func(n int) error
	data func(n int) error
}

// received is one message the sink accepted.
type received struct {
	From string
	To   []string
	Data []byte
}

// sink is an SMTP server on loopback (github.com/emersion/go-smtp) that records what it gets.
type sink struct {
	opts sinkOptions
	port int

	mu        sync.Mutex
	msgs      []received
	rcptCalls int
	dataCalls int
}

// startSink starts a sink on 127.0.0.1:0, stopped when the test ends.
func startSink(t *testing.T, opts sinkOptions) *sink {
	t.Helper()
	s := &sink{opts: opts}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.port = ln.Addr().(*net.TCPAddr).Port
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &sinkSession{sink: s}, nil
	}))
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	srv.ErrorLog = log.New(io.Discard, "", 0)
	if opts.starttls || opts.implicitTLS {
		srv.TLSConfig = selfSigned(t)
	}
	if opts.implicitTLS {
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// smtpConfig is a sender configuration for this sink.
func (s *sink) smtpConfig() SMTPConfig {
	cfg := SMTPConfig{Host: "127.0.0.1", Port: s.port, TLS: TLSNone, Timeout: 5 * time.Second, HeloName: "test.local"}
	switch {
	case s.opts.implicitTLS:
		cfg.TLS, cfg.InsecureSkipVerify = TLSImplicit, true
	case s.opts.starttls:
		cfg.TLS, cfg.InsecureSkipVerify = TLSStartTLS, true
	}
	if s.opts.auth {
		cfg.Username, cfg.Password = "user", "secret"
	}
	return cfg
}

func (s *sink) messages() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.msgs...)
}

func (s *sink) calls() (rcpt, data int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rcptCalls, s.dataCalls
}

// answer counts a call and returns the scripted reply for it.
func (s *sink) answer(counter *int, script func(int) error) error {
	s.mu.Lock()
	*counter++
	n := *counter
	s.mu.Unlock()
	if script == nil {
		return nil
	}
	return script(n)
}

type sinkSession struct {
	sink   *sink
	authed bool
	from   string
	to     []string
}

var _ smtp.AuthSession = (*sinkSession)(nil)

func (ss *sinkSession) AuthMechanisms() []string {
	if ss.sink.opts.auth {
		return []string{sasl.Plain}
	}
	return nil
}

func (ss *sinkSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != "user" || pass != "secret" {
			return smtp.ErrAuthFailed
		}
		ss.authed = true
		return nil
	}), nil
}

func (ss *sinkSession) Mail(from string, _ *smtp.MailOptions) error {
	if ss.sink.opts.auth && !ss.authed {
		return smtp.ErrAuthRequired
	}
	ss.from = from
	return nil
}

func (ss *sinkSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if err := ss.sink.answer(&ss.sink.rcptCalls, ss.sink.opts.rcpt); err != nil {
		return err
	}
	ss.to = append(ss.to, to)
	return nil
}

func (ss *sinkSession) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if err := ss.sink.answer(&ss.sink.dataCalls, ss.sink.opts.data); err != nil {
		return err
	}
	ss.sink.mu.Lock()
	defer ss.sink.mu.Unlock()
	ss.sink.msgs = append(ss.sink.msgs, received{ss.from, ss.to, data})
	return nil
}

func (ss *sinkSession) Reset()        { ss.from, ss.to = "", nil }
func (ss *sinkSession) Logout() error { return nil }

// smtpReply builds a scripted SMTP error reply.
func smtpReply(code int, msg string) error {
	return &smtp.SMTPError{Code: code, EnhancedCode: smtp.EnhancedCodeNotSet, Message: msg}
}

// firstN answers the first n calls with err and accepts the rest.
func firstN(n int, err error) func(int) error {
	return func(call int) error {
		if call <= n {
			return err
		}
		return nil
	}
}

// selfSigned makes a throwaway certificate for 127.0.0.1 and localhost.
func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// parsed is a composed message read back with the standard library.
type parsed struct {
	Header mail.Header
	Text   string
	HTML   string
}

// subject returns the decoded Subject.
func (p parsed) subject(t *testing.T) string {
	t.Helper()
	s, err := new(mime.WordDecoder).DecodeHeader(p.Header.Get("Subject"))
	if err != nil {
		t.Fatalf("decode subject: %v", err)
	}
	return s
}

// parse reads a multipart/alternative message (quoted-printable is decoded by mime/multipart).
func parse(t *testing.T, raw []byte) parsed {
	t.Helper()
	m, err := mail.ReadMessage(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatalf("read message: %v", err)
	}
	mt, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("content type %q: %v", m.Header.Get("Content-Type"), err)
	}
	p := parsed{Header: m.Header}
	mr := multipart.NewReader(m.Body, params["boundary"])
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return p
		}
		if err != nil {
			t.Fatalf("next part: %v", err)
		}
		readPart(t, part, &p)
	}
}

func readPart(t *testing.T, part *multipart.Part, p *parsed) {
	t.Helper()
	body, err := io.ReadAll(part)
	if err != nil {
		t.Fatalf("read part: %v", err)
	}
	switch ct := part.Header.Get("Content-Type"); {
	case strings.HasPrefix(ct, "text/plain; charset=utf-8"):
		p.Text = string(body)
	case strings.HasPrefix(ct, "text/html; charset=utf-8"):
		p.HTML = string(body)
	default:
		t.Fatalf("unexpected part %q", ct)
	}
}

// sampleReply is a Done reply with non-ASCII text and markup to escape.
func sampleReply() Reply {
	return Reply{
		Kind:        Done,
		To:          mail.Address{Name: "Jürgen Müller", Address: "owner@example.org"},
		From:        mail.Address{Name: "webordinary", Address: "edit@example.com"},
		ReplyTo:     "edit+t0k3n@example.com",
		Subject:     "Re: Grüße — ✓",
		InReplyTo:   "<orig-1@mail.example.org>",
		References:  []string{"root@mail.example.org"},
		JobID:       "job-42",
		Summary:     "Changed the greeting to Grüße — ✓ and removed <script>alert(1)</script>.",
		PreviewURLs: []string{"https://t0k3n.preview.example.com/", "https://main.preview.example.com/"},
		Commit:      "0123456789abcdef",
	}
}

// composeSample composes sampleReply with a different job id per call site.
func composeSample(t *testing.T, jobID string) []byte {
	t.Helper()
	r := sampleReply()
	r.JobID = jobID
	msg, err := Compose(r, newClock().Now())
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// runOutbox opens an outbox on dir and runs it until the test ends.
func runOutbox(t *testing.T, cfg Config) *Outbox {
	t.Helper()
	o := openOutbox(t, cfg)
	startRun(t, o)
	return o
}

func openOutbox(t *testing.T, cfg Config) *Outbox {
	t.Helper()
	cfg.Logger = testLogger(t)
	o, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// startRun runs o.Run in the background; the returned stop cancels it and waits for it.
func startRun(t *testing.T, o *Outbox) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel(errors.New("test stops the outbox"))
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
