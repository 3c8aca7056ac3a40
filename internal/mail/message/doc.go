// Package message turns a raw RFC 5322 email into the flat [Message] the mail router works with.
//
// It wraps github.com/jhillyerd/enmime/v2: MIME structure, transfer encodings (quoted-printable,
// base64), charsets (UTF-8, ISO-8859-1, Windows-1252, …) and RFC 2047 encoded words are decoded
// here, so everything downstream sees UTF-8 strings and decoded attachment bytes.
//
// Parsing is lenient by design: inbound mail is untrusted and frequently malformed. Parse returns
// a best-effort [Message] with the parser's complaints in [Message.Problems], and only fails (with
// an error wrapping [ErrMalformed]) when nothing usable can be read. It never panics. Where
// decoding would lose the text, the bytes as sent win: a text part labeled with another charset
// whose bytes are valid UTF-8 (beyond ASCII) is read as UTF-8, and a multipart message in which
// no text or HTML part is found has its text read from outside the parts: the whole body when
// it has no parts at all, else what comes before the first part (the MIME notice left out). A
// multipart body that uses another boundary than the one declared is read with the one it uses.
//
// Parsing is bounded ([Limits], [ParseContext]): nesting depth, part count, size and wall-clock
// time; a message over them fails with [ErrBudget]. Boundaries the sender left open are closed
// before enmime reads the message (its nested readers otherwise cost 2^depth reads at an
// unclosed end); a message whose boundary parameters shape cannot all place (more than 20 of
// them) is refused rather than handed to enmime blind. At the time budget or when ctx ends the caller gets its answer at once and
// the parser's reads fail, which ends it; what it may still do in memory before it notices
// (building the tree of at most MaxParts parts, converting HTML) is bounded by MaxParts and
// MaxBytes, not interrupted.
//
// What this package does not do: decide whether the sender is allowed (see the router), extract
// the new text of a reply (see package reply), or sanitize attachment names for storage.
package message
