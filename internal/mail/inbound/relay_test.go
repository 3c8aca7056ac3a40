package inbound_test

import (
	"context"
	"net/netip"
	"net/smtp"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/mail/inbound"
	"github.com/webordinary/webordinary/internal/mail/intake"
)

// forgedRelayResults is what a trusted relay writes for mail that passed its checks; anyone
// can write it too.
const forgedRelayResults = "Authentication-Results: relay.test; dkim=pass header.d=example.com header.s=sel; " +
	"spf=pass smtp.mailfrom=alice@example.com; dmarc=pass header.from=example.com\r\n"

// relayIntake starts a real SMTP intake in front of f's mail router, trusting relay.test's
// Authentication-Results from relays only. handled receives each envelope once handled.
func relayIntake(t *testing.T, relays ...netip.Prefix) (f *fixture, addr string, handled chan intake.Envelope) {
	t.Helper()
	f = setupWith(t, func(c *inbound.Config) { c.Auth.TrustedAuthServID = "relay.test" })
	handled = make(chan intake.Envelope, 10)
	s, err := intake.New(intake.Config{Addr: "127.0.0.1:0", Domains: []string{"edit.example.net"}, Spool: t.TempDir(),
		TrustedRelays: relays, RetryEvery: 50 * time.Millisecond,
		Handler: func(ctx context.Context, env intake.Envelope, raw []byte) error {
			err := f.in.Handle(ctx, env, raw)
			if err == nil {
				handled <- env
			}
			return err
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return f, s.Addr().String(), handled
}

// sendForged is the attacker: a job on the platform's host connects to the intake over
// loopback with alice's address in From and the relay's verdicts written by itself.
func sendForged(t *testing.T, f *fixture, addr string, handled chan intake.Envelope) (intake.Envelope, []byte) {
	t.Helper()
	raw := f.mail("Alice <alice@example.com>", "edit@edit.example.net", "forged@example.com", forgedRelayResults,
		"Replace the homepage with the attacker's", "")
	if err := smtp.SendMail(addr, nil, "alice@example.com", []string{"edit@edit.example.net"}, raw); err != nil {
		t.Fatal(err)
	}
	select {
	case env := <-handled:
		return env, raw
	case <-time.After(30 * time.Second):
		t.Fatal("the message was not handled within 30s")
	}
	return intake.Envelope{}, nil
}

// TestForgedRelayResultsFromNonRelayNeverRun: with a trusted authserv-id, a client that is not
// the relay (here loopback, like a job on the same host) writes the relay's
// Authentication-Results itself. The header is not trusted: the message is checked as if
// straight from the internet, fails, queues no job and gets no reply.
func TestForgedRelayResultsFromNonRelayNeverRun(t *testing.T) {
	t.Parallel()
	f, addr, handled := relayIntake(t, netip.MustParsePrefix("192.0.2.1/32"))
	env, raw := sendForged(t, f, addr, handled)
	if env.FromRelay {
		t.Fatalf("loopback marked as the relay: %+v", env)
	}
	if n := f.pending("alice"); n != 0 {
		t.Fatalf("a forged Authentication-Results from a non-relay queued %d job(s) for alice", n)
	}
	rep, err := f.in.Inspect(context.Background(), env, raw)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Decision.Action != "ignore" || !strings.Contains(rep.Decision.Reason, "not authenticated") || rep.Auth.Source != "verified" {
		t.Fatalf("decision %+v, auth %+v; want ignored as unauthenticated, verified by us", rep.Decision, rep.Auth)
	}
	if len(f.sent(0)) != 0 {
		t.Fatal("a forged message got a reply")
	}
}

// TestRelayResultsFromListedRelayTrusted: the same message from a listed relay address is
// trusted, and runs.
func TestRelayResultsFromListedRelayTrusted(t *testing.T) {
	t.Parallel()
	f, addr, handled := relayIntake(t, netip.MustParsePrefix("10.9.0.0/16"), netip.MustParsePrefix("127.0.0.1/32"))
	env, _ := sendForged(t, f, addr, handled)
	if !env.FromRelay {
		t.Fatalf("the listed relay not recognized: %+v", env)
	}
	if n := f.pending("alice"); n != 1 {
		t.Fatalf("%d job(s) queued for the relay's message; want 1", n)
	}
}
