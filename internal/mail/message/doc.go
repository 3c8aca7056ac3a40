// Package message turns a raw RFC 5322 email into the flat [Message] the mail router works with.
//
// It wraps github.com/jhillyerd/enmime/v2: MIME structure, transfer encodings (quoted-printable,
// base64), charsets (UTF-8, ISO-8859-1, Windows-1252, …) and RFC 2047 encoded words are decoded
// here, so everything downstream sees UTF-8 strings and decoded attachment bytes.
//
// Parsing is lenient by design: inbound mail is untrusted and frequently malformed. Parse returns
// a best-effort [Message] with the parser's complaints in [Message.Problems], and only fails (with
// an error wrapping [ErrMalformed]) when nothing usable can be read. It never panics.
//
// What this package does not do: decide whether the sender is allowed (see the router), extract
// the new text of a reply (see package reply), or sanitize attachment names for storage.
package message
