// Package outbox is webordinary's outgoing mail: it tells a site owner what became of the
// instruction they emailed.
//
// There are three pieces, used in this order:
//
//   - [Compose] renders a [Reply] (done, failed, interrupted, dead, refused, rate-limited or
//     received) as a complete RFC 5322 message: multipart/alternative with a plain-text and an
//     HTML part, threaded under the owner's message (In-Reply-To, References, "Re: " subject),
//     marked as an automatic reply (Auto-Submitted, X-Auto-Response-Suppress) and carrying a
//     Message-ID that is stable per job and kind, so that a resend is recognizable.
//   - An [Outbox] is a durable queue of composed messages, kept in a spool directory (fsync'd
//     files, for one process) or in the engine every serve shares ([Engine]: broker tables and
//     blobs, so queued messages outlive the serve and its disk). Enqueue returns once the
//     message is stored; [Outbox.Run] delivers due messages, retries temporary failures with
//     exponential backoff and parks permanent (or exhausted) ones together with the error. On
//     an engine, a serve claims a message (compare-and-set, with a lease) before sending it, so
//     serves sharing the engine send each message once. Retrying and deduplication live here,
//     once, for every [Sender].
//   - A [Sender] delivers one message: [NewSMTP] relays through an SMTP server (via
//     github.com/wneessen/go-mail) and [Dir] writes .eml files, the development outbox. Senders
//     classify failures as [ErrPermanent] or [ErrTemporary]; they do not retry.
//
// Delivery is at least once. A crash between a successful send and the store's update
// re-sends the message after restart (or, on an engine, once the claim's lease ends); the
// receiving side sees the same Message-ID twice.
//
// What this package does not do: decide who gets a reply or which kind (the pipeline does),
// parse incoming mail (package message), or sign messages (DKIM belongs to the relay).
package outbox
