package outbox

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
)

func TestSMTPDeliversComposedReply(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts sinkOptions
	}{
		{"starttls with auth", sinkOptions{starttls: true, auth: true}},
		{"implicit tls with auth", sinkOptions{implicitTLS: true, auth: true}},
		{"plain", sinkOptions{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startSink(t, tt.opts)
			sender, err := NewSMTP(s.smtpConfig())
			if err != nil {
				t.Fatal(err)
			}
			msg := composeSample(t, "job-smtp")
			if err := sender.Send(context.Background(), "edit@example.com", []string{"owner@example.org"}, msg); err != nil {
				t.Fatalf("Send: %v", err)
			}
			got := s.messages()
			if len(got) != 1 {
				t.Fatalf("sink got %d messages, want 1", len(got))
			}
			if got[0].From != "edit@example.com" || strings.Join(got[0].To, ",") != "owner@example.org" {
				t.Errorf("envelope = %q -> %q", got[0].From, got[0].To)
			}
			checkReceivedReply(t, parse(t, got[0].Data))
		})
	}
}

// checkReceivedReply checks a delivered sampleReply survived the trip intact.
func checkReceivedReply(t *testing.T, p parsed) {
	t.Helper()
	h := p.Header
	checks := []struct{ name, got, want string }{
		{"Message-ID", h.Get("Message-ID"), "<wo-job-smtp-done@example.com>"},
		{"In-Reply-To", h.Get("In-Reply-To"), "<orig-1@mail.example.org>"},
		{"Subject", p.subject(t), "Re: Grüße — ✓"},
		{"Reply-To", h.Get("Reply-To"), `"webordinary" <edit+t0k3n@example.com>`},
		{"Auto-Submitted", h.Get("Auto-Submitted"), "auto-replied"},
		{"X-Auto-Response-Suppress", h.Get("X-Auto-Response-Suppress"), "All"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if refs := h.Get("References"); !strings.Contains(refs, "<orig-1@mail.example.org>") || !strings.Contains(refs, "<root@mail.example.org>") {
		t.Errorf("References = %q, want the thread root and the original", refs)
	}
	if !strings.Contains(p.Text, "Grüße — ✓") || !strings.Contains(p.HTML, "Grüße — ✓") {
		t.Errorf("non-ASCII text lost:\ntext: %s\nhtml: %s", p.Text, p.HTML)
	}
	if strings.Contains(p.HTML, "<script>") || !strings.Contains(p.HTML, "&lt;script&gt;") {
		t.Errorf("summary not escaped in html:\n%s", p.HTML)
	}
}

func TestSMTPClassifiesFailures(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		opts   sinkOptions
		modify func(*SMTPConfig)
		ctx    context.Context
		want   error
	}{
		{"550 to rcpt", sinkOptions{rcpt: firstN(1, smtpReply(550, "no such user"))}, nil, nil, ErrPermanent},
		{"554 to data", sinkOptions{data: firstN(1, smtpReply(554, "rejected as spam"))}, nil, nil, ErrPermanent},
		{"451 to data", sinkOptions{data: firstN(1, smtpReply(451, "try again later"))}, nil, nil, ErrTemporary},
		{"452 to rcpt", sinkOptions{rcpt: firstN(1, smtpReply(452, "mailbox full"))}, nil, nil, ErrTemporary},
		{"wrong password", sinkOptions{starttls: true, auth: true}, func(c *SMTPConfig) { c.Password = "wrong" }, nil, ErrTemporary},
		{"starttls required but not offered", sinkOptions{}, func(c *SMTPConfig) { c.TLS = TLSStartTLS }, nil, ErrTemporary},
		{"nobody listening", sinkOptions{}, func(c *SMTPConfig) { c.Port = closedPort(t) }, nil, ErrTemporary},
		{"cancelled", sinkOptions{}, nil, cancelled, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startSink(t, tt.opts)
			cfg := s.smtpConfig()
			if tt.modify != nil {
				tt.modify(&cfg)
			}
			sender, err := NewSMTP(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			err = sender.Send(ctx, "edit@example.com", []string{"owner@example.org"}, composeSample(t, "job-x"))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Send error = %v, want %v", err, tt.want)
			}
			if errors.Is(err, ErrPermanent) && errors.Is(err, ErrTemporary) {
				t.Errorf("error is both permanent and temporary: %v", err)
			}
			if len(s.messages()) != 0 {
				t.Errorf("sink accepted a message")
			}
		})
	}
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

func TestNewSMTPValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  SMTPConfig
		want string
	}{
		{"no host", SMTPConfig{}, "Host is required"},
		{"bad port", SMTPConfig{Host: "mail", Port: 70000}, "out of range"},
		{"bad tls", SMTPConfig{Host: "mail", TLS: "maybe"}, `TLS "maybe"`},
	}
	for _, tt := range tests {
		_, err := NewSMTP(tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tt.name, err, tt.want)
		}
	}
	if _, err := NewSMTP(SMTPConfig{Host: "mail.example.com"}); err != nil {
		t.Errorf("defaults: %v", err)
	}
}
