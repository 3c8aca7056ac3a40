// Package reply extracts the new text a person wrote in an email body, dropping quoted history,
// signatures and mobile footers, so that the router hands only the instruction ("make the header
// green") to the rest of the system.
//
// Extraction runs two passes. The first, coarse pass (coarse.go) gives each line a kind (text,
// quote, attribution or other marker of earlier mail, header line, footer, separator) and cuts
// where the kinds say the person's text ends: at a separator, at a footer below text, below
// text followed by earlier mail to the end, above a block of header lines; a reply written
// below the earlier mail is its last run of text. The history and footers it does not know
// are cut off after it (trim.go). The second is our own line scan, described below. The
// coarse pass's text wins unless it left nothing or dropped a line our scan holds to be content
// ("From: Monday to Friday", "you wrote"), or stopped where the structure says the person's
// text goes on: at a delimiter with a sentence below it and the history after that, or above
// the person's words resumed below a quote block our scan recognized by its attribution.
// Forwards are ours alone. So "> " quotes the person answers below are kept. When both passes
// leave nothing but the body has unquoted text, that text is the instruction and
// Result.Guessed says it was a guess: an instruction is never lost. Everything runs on Go's
// regexp (linear time) and plain string code, over the body's first MaxBody bytes only
// (Result.Cut says a longer body was cut): a sender's megabytes cost a bounded time. TestCorpusScores scores ours and
// github.com/dimiro1/reply (a test dependency only) side by side on the public corpora kept
// beside the repository in ../shared/corpora/reply, per folder, and fails when ours loses a line
// of an instruction or scores below dimiro1/reply on any folder.
//
// The input is the plain-text body that package message produced (the text/plain part, or the
// HTML converted to text, where blockquotes became "> " lines). Extraction is heuristic and works
// line by line:
//
//   - Quoted history starts at an attribution line ("On … wrote:", also wrapped over up to three
//     lines as Gmail does, in English, German (also name first: "Name schrieb am …:"), French,
//     Spanish, Italian, Dutch, Portuguese, Romanian, Greek, Arabic, the Nordic languages,
//     Polish, Russian, Czech, Finnish, Turkish, Hungarian, Japanese and Chinese, plus a generic
//     "…<addr@host>:" form followed by a quote; one that lost its colon counts when a quote or
//     header block follows at once), at an Outlook header block ("From:/Sent:/To:/Subject:" and
//     its localized forms, possibly after a "____" line) or at an "-----Original Message-----"
//     marker. A wrapped attribution never takes in the person's own lines above it: the
//     shortest one that ends on the same line wins.
//   - A mail gateway's "CAUTION: … from an external sender" line on top of the body is dropped.
//   - A run of "> " lines is quoted history too, whether the person wrote above it (top-posting)
//     or below it (bottom-posting and inline answers, whose text is kept). An attribution the
//     person wrote above and then answered two or more quoted passages below is kept with the
//     quotes (inline.go): it sits inside their text, and when unsure we keep. The exception is a short
//     quote introduced by the person's own line ending in ":" ("change the tagline to:"), which is
//     content.
//   - After a "-- " signature separator everything is signature; trailing mobile footers ("Sent
//     from my iPhone", "Get Outlook for iOS", …) and a trailing run of at least two contact lines
//     (phone numbers, web addresses, "Owner | Company") are removed. Closings such as "Thanks,
//     Ana" are kept: they may carry meaning and are harmless to an instruction reader.
//
// Forwarded mail ("---------- Forwarded message ---------", "Begin forwarded message:", and
// localized markers) sets Result.Forwarded. The new text is what the forwarder wrote above the
// marker, unless that note only points at the forward ("FYI", "see below", "Zur Info"): then the
// forward is what the person sends to be acted on, and Text is the note and the whole forward.
// When nothing is written above it, the person is forwarding an instruction they received,
// so Text is the forwarded message's own new text (its headers, quotes and signature removed). An
// Outlook header block with nothing at all above it is treated the same way, because that is how
// Outlook forwards look and an empty reply carries no instruction.
package reply
