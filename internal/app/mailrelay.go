package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"

	"github.com/webordinary/webordinary/internal/mail/inbound"
	"github.com/webordinary/webordinary/internal/mail/intake"
)

// validateTrustedRelays: the relay of Mail.TrustedAuthServ is known by its address, since
// anyone who reaches the SMTP listener can write its Authentication-Results. SES's header
// comes through SES's own queue instead, so Mail.SESQueue needs no address.
func (m *Mail) validateTrustedRelays() error {
	relays, err := intake.ParseRelays(m.TrustedRelays)
	switch {
	case err != nil:
		return fieldErr("Mail.TrustedRelays", strings.Join(m.TrustedRelays, ","), "%v", err)
	case m.SESQueue != "" && len(relays) > 0:
		return fieldErr("Mail.TrustedRelays", strings.Join(m.TrustedRelays, ","), "is not used with Mail.SESQueue: SES's mail comes through its queue, not over SMTP")
	case m.SESQueue != "":
		return nil
	case m.TrustedAuthServ == "" && len(relays) > 0:
		return fieldErr("Mail.TrustedRelays", strings.Join(m.TrustedRelays, ","), "is used only with Mail.TrustedAuthServ (the relay's authserv-id)")
	case m.TrustedAuthServ != "" && len(relays) == 0:
		return fieldErr("Mail.TrustedAuthServ", m.TrustedAuthServ, "needs Mail.TrustedRelays: add the address(es) the relay connects from (IPs or CIDRs, e.g. 10.0.0.25); mail from any other client is checked as if straight from the internet")
	}
	return nil
}

// relays are Mail.TrustedRelays, checked by Validate.
func (m Mail) relays() intake.Relays {
	rs, _ := intake.ParseRelays(m.TrustedRelays)
	return rs
}

// inspect is the mail router's Inspect for a message as if it arrived from env.RemoteIP:
// from the relay when that is one of its addresses (or always, for mail from SES).
func (p *mailParts) inspect(ctx context.Context, env intake.Envelope, raw []byte) (*inbound.Report, error) {
	env.FromRelay = p.ses != nil || p.relays.Contains(env.RemoteIP)
	return p.in.Inspect(ctx, env, raw)
}

// checkLoopbackRelay refuses a trusted relay address on loopback while this process runs jobs
// that share the host's network (no sandbox, or no network namespace of their own): such a job
// could connect from loopback and write the relay's Authentication-Results. With jobs in their
// own namespaces it only warns (another program on this host could still do it).
func (a *App) checkLoopbackRelay(relays intake.Relays) error {
	for _, p := range relays {
		if !p.Addr().IsLoopback() && !p.Contains(netip.IPv6Loopback()) && !p.Contains(netip.AddrFrom4([4]byte{127, 0, 0, 1})) {
			continue
		}
		if a.runsJobs() && a.egress == nil {
			return fmt.Errorf("Mail.TrustedRelays %s is on loopback, and this process runs jobs that share the host's network (%s): a job could connect from it and write the relay's Authentication-Results; list the relay's own address instead, or run jobs sandboxed", p, a.egressWhy)
		}
		a.log.Warn("a trusted mail relay address is on loopback: any program on this host can connect from it and write the relay's Authentication-Results; list the relay's own address instead",
			slog.String("relay", p.String()))
		return nil
	}
	return nil
}
