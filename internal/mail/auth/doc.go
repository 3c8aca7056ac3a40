// Package auth decides whether an inbound email really comes from the domain in its From header.
//
// Site owners email instructions that an AI agent then carries out on their website, so a spoofed
// sender must never reach an agent. [Check] is the gate: the mail front end calls it for every
// message before routing, and refuses (or, on [ErrTemporary], defers) anything that does not pass.
//
// # What is checked
//
// The rules are DMARC's (RFC 7489) without its reporting: a message passes when a DKIM signature
// (RFC 6376) verifies for a domain aligned with the From domain, or — under [RequireAligned] only —
// when SPF (RFC 7208) passes for a MAIL FROM domain aligned with the From domain. Alignment is
// relaxed (same organizational domain, computed with the public suffix list) unless the sender's
// DMARC record asks for strict alignment (adkim=s, aspf=s). The published DMARC policy p= is
// reported but never relaxes the check: a domain with p=none still fails here when unauthenticated.
//
// Check works in one of two modes, chosen by [Config]:
//
//   - verified: we are the receiving MX. Check verifies DKIM signatures, runs SPF for
//     [Envelope.RemoteIP], and looks up the DMARC record, all through [Config.Resolver].
//   - trusted relay: a relay in front of us (Amazon SES, a Postfix with OpenDKIM/OpenDMARC)
//     already authenticated the message, and the caller knows it came from the relay
//     ([Envelope.FromRelay]: it connected from the relay's address, or through SES's own
//     transport). A message from anyone else is verified as above, whatever its headers say.
//     Check reads only the Authentication-Results header fields
//     (RFC 8601) whose authserv-id is [Config.TrustedAuthServID], and does no DNS at all. Any
//     Authentication-Results with another authserv-id is ignored, since anyone can write one.
//     Per method (dkim, spf, dmarc) only the topmost trusted header that reports it counts: relays
//     prepend their headers, so a forged header carrying the relay's id sits below the real one.
//
// # Using the result
//
// The returned [Verdict] says what was found, why it passes or not, and is printed as JSON by
// `webordinary mail inspect`. The error is nil exactly when Verdict.Pass is true; otherwise it
// wraps one of the package's sentinel errors, so a caller that checks only the error cannot let a
// spoofed message through by accident. [ErrTemporary] means a DNS lookup failed transiently and
// the message should be deferred (SMTP 4xx), not refused.
//
// Authentication is per domain, not per mailbox: a pass proves the message was sent through the
// From domain's mail system, so the caller still matches [Verdict.From] (the exact address checked
// here, not a From parsed elsewhere) against the project's owners. A DKIM-signed message can also
// be replayed verbatim by anyone who holds a copy; deduplicating on Message-ID and rejecting old
// Date headers is the caller's job.
//
// Tests use [StaticResolver] so they run offline; production uses [NetResolver].
package auth
