package intake_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net/smtp"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/capability"
	"github.com/webordinary/webordinary/internal/mail/intake"
)

type received struct {
	mu   sync.Mutex
	msgs []string
	envs []intake.Envelope
	got  chan struct{}
}

func newReceived() *received { return &received{got: make(chan struct{}, 100)} }

func (r *received) handler(ctx context.Context, env intake.Envelope, raw []byte) error {
	r.mu.Lock()
	r.msgs = append(r.msgs, string(raw))
	r.envs = append(r.envs, env)
	r.mu.Unlock()
	r.got <- struct{}{}
	return nil
}

func start(t *testing.T, spool string, h intake.Handler, maxBytes int64) (addr string, stop func()) {
	t.Helper()
	s, err := intake.New(intake.Config{Addr: "127.0.0.1:0", Domains: []string{"edit.example.com"}, Spool: spool,
		Handler: h, MaxBytes: maxBytes, RetryEvery: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return s.Addr().String(), stop
}

const msg = "From: Alice <alice@example.com>\r\nTo: edit@edit.example.com\r\nSubject: header\r\nMessage-ID: <m1@example.com>\r\n\r\nMake the header green.\r\n"

func wait(t *testing.T, r *received, n int) {
	t.Helper()
	for range n {
		select {
		case <-r.got:
		case <-time.After(10 * time.Second):
			t.Fatalf("message not handled within 10s")
		}
	}
}

func TestAcceptAndHandle(t *testing.T) {
	t.Parallel()
	r := newReceived()
	addr, _ := start(t, t.TempDir(), r.handler, 0)
	if err := smtp.SendMail(addr, nil, "alice@example.com", []string{"edit@edit.example.com"}, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	wait(t, r, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !strings.Contains(r.msgs[0], "Make the header green.") || r.envs[0].MailFrom != "alice@example.com" || r.envs[0].RemoteIP != "127.0.0.1" {
		t.Fatalf("got %q %+v", r.msgs[0], r.envs[0])
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	r := newReceived()
	addr, _ := start(t, t.TempDir(), r.handler, 1024)
	err := smtp.SendMail(addr, nil, "alice@example.com", []string{"someone@elsewhere.org"}, []byte(msg))
	if err == nil || !strings.Contains(err.Error(), "550") {
		t.Fatalf("foreign recipient: %v; want 550", err)
	}
	big := msg + strings.Repeat(strings.Repeat("x", 70)+"\r\n", 60)
	err = smtp.SendMail(addr, nil, "alice@example.com", []string{"edit@edit.example.com"}, []byte(big))
	if err == nil || !strings.Contains(err.Error(), "552") {
		t.Fatalf("oversize: %v; want 552", err)
	}
}

// TestCrashBetweenAcceptAndHandling: the first server accepts (250) but never manages to
// handle the message; a new server on the same spool handles it, once.
func TestCrashBetweenAcceptAndHandling(t *testing.T) {
	t.Parallel()
	spool := t.TempDir()
	failing := func(context.Context, intake.Envelope, []byte) error { return errors.New("router down") }
	addr, stop := start(t, spool, failing, 0)
	if err := smtp.SendMail(addr, nil, "alice@example.com", []string{"edit@edit.example.com"}, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	stop()
	r := newReceived()
	start(t, spool, r.handler, 0)
	wait(t, r, 1)
	deadline := time.Now().Add(10 * time.Second)
	for spooled(t, spool) > 0 { // handled messages leave the spool; only a spooled one is retried
		if time.Now().After(deadline) {
			t.Fatal("handled message still in the spool")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.msgs) != 1 {
		t.Fatalf("handled %d times; want once", len(r.msgs))
	}
}

// TestSwaks sends with a real third-party SMTP client.
func TestSwaks(t *testing.T) {
	t.Parallel()
	capability.Need(t, capability.Swaks)
	r := newReceived()
	addr, _ := start(t, t.TempDir(), r.handler, 0)
	host, port, _ := strings.Cut(addr, ":")
	out, err := exec.Command("swaks", "--server", host, "--port", port, "--from", "alice@example.com",
		"--to", "edit@edit.example.com", "--header", "Subject: from swaks", "--body", "Add a gallery page").CombinedOutput()
	if err != nil {
		t.Fatalf("swaks: %v\n%s", err, out)
	}
	wait(t, r, 1)
}

func spooled(t *testing.T, dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".eml") {
			n++
		}
	}
	return n
}

// BenchmarkAcceptDurably measures messages accepted (fsync'd, 250) per second over real
// SMTP connections from 4 concurrent clients.
func BenchmarkAcceptDurably(b *testing.B) {
	r := make(chan struct{}, 1<<20)
	s, err := intake.New(intake.Config{Addr: "127.0.0.1:0", Domains: []string{"edit.example.com"}, Spool: b.TempDir(),
		Handler: func(context.Context, intake.Envelope, []byte) error { r <- struct{}{}; return nil }})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	defer func() { cancel(); <-done }() // stop before the spool directory is removed
	addr := s.Addr().String()
	b.SetParallelism(2) // 2 × GOMAXPROCS(2) = 4 clients
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := smtp.SendMail(addr, nil, "alice@example.com", []string{"edit@edit.example.com"}, []byte(msg)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}

// TestStartTLS: with a certificate configured the listener offers STARTTLS and accepts a
// message over the upgraded connection.
func TestStartTLS(t *testing.T) {
	t.Parallel()
	cert := selfSigned(t)
	r := newReceived()
	s, err := intake.New(intake.Config{Addr: "127.0.0.1:0", Domains: []string{"edit.example.com"}, Spool: t.TempDir(),
		Handler: r.handler, TLS: &tls.Config{Certificates: []tls.Certificate{cert}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Run(ctx) }()
	c, err := smtp.Dial(s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); !ok {
		t.Fatal("STARTTLS not offered")
	}
	if err := c.StartTLS(&tls.Config{InsecureSkipVerify: true}); err != nil {
		t.Fatal(err)
	}
	if err := c.Mail("alice@example.com"); err != nil {
		t.Fatal(err)
	}
	if err := c.Rcpt("edit@edit.example.com"); err != nil {
		t.Fatal(err)
	}
	w, _ := c.Data()
	_, _ = w.Write([]byte(msg))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	wait(t, r, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.envs[0].TLS {
		t.Fatal("envelope does not record TLS")
	}
}

func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
