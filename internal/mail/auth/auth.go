package auth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// Sentinel errors returned (wrapped) by [Check]. Each comes with a Verdict whose Reason says more.
var (
	// ErrUnauthenticated: the message does not meet the policy; it may be spoofed. Refuse it.
	ErrUnauthenticated = errors.New("sender not authenticated")
	// ErrTemporary: a DNS lookup failed transiently; defer the message and check again later.
	ErrTemporary = errors.New("sender authentication failed temporarily")
	// ErrFrom: the From header is missing, repeated, unparseable or has several addresses.
	ErrFrom = errors.New("unusable from header")
	// ErrInvalidConfig: the Config or Policy passed to Check is wrong; fix the caller.
	ErrInvalidConfig = errors.New("invalid sender authentication config")
)

// Policy is a project's requirement. The zero value means RequireAligned.
type Policy string

// Policies.
const (
	// RequireAligned accepts an aligned DKIM pass or an aligned SPF pass (DMARC-style). Default.
	RequireAligned Policy = "aligned"
	// RequireDKIM accepts only an aligned DKIM pass; SPF is reported but never enough.
	RequireDKIM Policy = "dkim"
	// AllowAll checks nothing beyond a usable From header. Dangerous: anyone can then instruct the
	// agent by writing the owner's address in From. Only for trusted internal setups.
	AllowAll Policy = "none"
)

// Config says how mail reaches us. The zero value checks with the system DNS.
type Config struct {
	// Resolver is the DNS the checks use; nil means NetResolver{} (the system resolver).
	// Unused for a message from the trusted relay (see TrustedAuthServID).
	Resolver Resolver
	// TrustedAuthServID, when set, means we are behind a trusted relay (SES, Postfix): for a
	// message that came from it (Envelope.FromRelay), Check uses only the
	// Authentication-Results header fields whose authserv-id equals this value (RFC 8601),
	// ignoring any other Authentication-Results (an attacker can add their own), and makes no
	// DNS checks. A message from anyone else is verified as if it came straight from the
	// internet: anyone can write the relay's header.
	TrustedAuthServID string
	// Now is used for DKIM signature expiry (x=); nil means time.Now.
	Now func() time.Time
}

// Envelope is what the SMTP session knew.
type Envelope struct {
	// RemoteIP is the connecting client's IP, for SPF when we are the receiving MX. Without it
	// SPF is not checked (result none).
	RemoteIP net.IP
	// Helo is the name the client gave in HELO/EHLO; SPF checks it when MailFrom is empty.
	Helo string
	// MailFrom is the SMTP MAIL FROM (return path); empty for bounces.
	MailFrom string
	// FromRelay is true when the message came from the trusted relay (the caller checked the
	// connecting address, or the transport is the relay's own, like SES's). Only then are
	// Config.TrustedAuthServID's Authentication-Results used.
	FromRelay bool
}

// Check authenticates the sender of raw (a complete RFC 5322 message) under policy.
//
// The Verdict is always filled in as far as the checks got. The error is nil exactly when
// Verdict.Pass is true; otherwise it wraps ErrUnauthenticated, ErrTemporary, ErrFrom or
// ErrInvalidConfig, or is ctx.Err() when ctx ended first. Check blocks for the DNS lookups it
// makes (bound them with ctx), never retries them, and is safe for concurrent use.
func Check(ctx context.Context, cfg Config, policy Policy, raw []byte, env Envelope) (Verdict, error) {
	cfg = cfg.withDefaults()
	policy = policy.withDefault()
	if err := validate(cfg, policy); err != nil {
		return Verdict{Reason: err.Error()}, err
	}
	msg, err := parseMessage(raw)
	if err != nil {
		return Verdict{DKIM: []DKIMResult{}, Source: cfg.source(env), Reason: reasonOf(err)}, err
	}
	if policy == AllowAll {
		return allowAll(msg), nil
	}
	ev := cfg.gather(ctx, msg, env)
	if err := ctx.Err(); err != nil {
		return ev.verdict, err
	}
	return decide(policy, ev)
}

// gather collects the evidence: from the trusted relay's headers when the message came from
// it, else by verifying it ourselves.
func (cfg Config) gather(ctx context.Context, msg *message, env Envelope) evidence {
	if cfg.relayed(env) {
		return fromAuthResults(cfg.TrustedAuthServID, msg, env)
	}
	return verify(ctx, cfg, msg, env)
}

func (cfg Config) withDefaults() Config {
	if cfg.Resolver == nil {
		cfg.Resolver = NetResolver{}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg
}

// relayed reports whether the trusted relay's Authentication-Results decide for env.
func (cfg Config) relayed(env Envelope) bool {
	return cfg.TrustedAuthServID != "" && env.FromRelay
}

func (cfg Config) source(env Envelope) string {
	if cfg.relayed(env) {
		return "authentication-results:" + cfg.TrustedAuthServID
	}
	return "verified"
}

func (p Policy) withDefault() Policy {
	if p == "" {
		return RequireAligned
	}
	return p
}

func validate(cfg Config, policy Policy) error {
	switch policy {
	case RequireAligned, RequireDKIM, AllowAll:
	default:
		return fmt.Errorf("%w: unknown policy %q: use %q, %q or %q",
			ErrInvalidConfig, policy, RequireAligned, RequireDKIM, AllowAll)
	}
	if !validAuthServID(cfg.TrustedAuthServID) {
		return fmt.Errorf("%w: trusted authserv-id %q must be a single token such as the relay's host name",
			ErrInvalidConfig, cfg.TrustedAuthServID)
	}
	return nil
}

func allowAll(msg *message) Verdict {
	return Verdict{
		From:       msg.from,
		FromDomain: msg.fromDomain,
		DKIM:       []DKIMResult{},
		SPF:        SPFResult{Result: "none", Error: "not checked: policy none"},
		DMARC:      DMARCResult{Result: "none", Error: "not checked: policy none"},
		Source:     "unchecked",
		Pass:       true,
		Reason:     "sender authentication is disabled for this project (policy none): anyone can send as " + msg.from,
	}
}

// reasonOf is the human part of one of our errors: the text after the sentinel.
func reasonOf(err error) string {
	var r *reasonError
	if errors.As(err, &r) {
		return r.reason
	}
	return err.Error()
}

// reasonError wraps a sentinel with a sentence a person can act on.
type reasonError struct {
	sentinel error
	reason   string
}

func (e *reasonError) Error() string { return e.sentinel.Error() + ": " + e.reason }
func (e *reasonError) Unwrap() error { return e.sentinel }

func failWith(sentinel error, format string, args ...any) error {
	return &reasonError{sentinel: sentinel, reason: fmt.Sprintf(format, args...)}
}
