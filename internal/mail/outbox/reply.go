package outbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/mail"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/failure"
)

// Kind says what happened to an instruction; it selects the copy of a [Reply].
type Kind string

// The kinds of reply.
const (
	// Done: the agent edited the site; the reply shows what changed, the preview and a picture.
	Done Kind = "done"
	// Failed: the job ran and failed; the reply says what went wrong and what to try.
	Failed Kind = "failed"
	// Interrupted: a newer message from the same thread took over; partial work was kept.
	Interrupted Kind = "interrupted"
	// Dead: the job failed every attempt and will not be retried.
	Dead Kind = "dead"
	// Refused: the message was not acted on (unverified sender, unknown project, ...).
	Refused Kind = "refused"
	// Held: too many messages in a short time; the reply lists those held for the operator
	// to let through (one reply per sender and window, never one per message).
	Held Kind = "held"
	// Received: an acknowledgement that the job was queued.
	Received Kind = "received"
	// Published: a publish (or undo) went live; the reply gives the live URL.
	Published Kind = "published"
	// Waiting: the job has waited long (a busy model service, earlier work ahead of it); a
	// short "still on it" note, once per job.
	Waiting Kind = "waiting"
)

// Kinds lists every kind, in a stable order.
var Kinds = []Kind{Done, Failed, Interrupted, Dead, Refused, Held, Received, Published, Waiting}

// Reply is what a person is told about their instruction.
type Reply struct {
	Kind Kind
	// To is the person who sent the instruction. Required.
	To mail.Address
	// From is our address, e.g. "webordinary <edit@example.com>". Required.
	From mail.Address
	// ReplyTo is the threading address, e.g. edit+<token>@example.com; optional. Without a
	// display name it borrows From's.
	ReplyTo string
	// Subject is the original subject; the reply's is "Re: <subject>" (existing reply prefixes
	// such as "RE:", "Aw:" or "Sv:" are not repeated).
	Subject string
	// InReplyTo is the Message-ID replied to, without angle brackets.
	InReplyTo string
	// References are the thread's Message-IDs (without angle brackets); InReplyTo is appended
	// when missing.
	References []string
	// MessageID is this reply's Message-ID without angle brackets. When empty it is derived
	// from JobID (or, lacking one, InReplyTo), Kind and the domain of From, so the same reply
	// always gets the same id: "wo-<jobid>-<kind>@<domain>".
	MessageID string
	JobID     string
	Summary   string
	// PreviewURLs are preview links, the thread's own preview first (the reply shows that one).
	PreviewURLs []string
	// Commit (Interrupted) is the commit that saved the partial work; empty when none.
	Commit string
	// Attempts is how many times the job ran (Dead).
	Attempts int
	// HeldMessages (Held) are the messages held, one line each (subject, first words);
	// HeldUntil is when the window ends: anything sent before then is held too.
	HeldMessages []string
	HeldUntil    time.Time
	// Error is what went wrong (Refused: said to the sender; Failed, Dead: for the operator
	// only — the owner reads Problem's copy).
	Error string
	// Problem is the failure's kind, as the job's result carries it, for the owner's copy
	// (Failed, Dead).
	Problem failure.Kind
	// Hint is what to try next.
	Hint string
	// Understood is the instruction as it was read from the owner's email; replies about a job
	// quote it back ("I read your request as: …"). Optional.
	Understood string
	// Guessed says Understood is a best guess (nothing was clearly new in the email).
	Guessed bool
	// Superseded (Interrupted): a newer message on the same thread took over; otherwise the
	// operator stopped the job. Commit is empty when nothing had changed.
	Superseded bool
	// Continued (Done) counts earlier messages on the thread that this one interrupted and
	// whose request the agent was told about.
	Continued int
	// LiveURL is the live site's address (Published); Undone says an undo put it back.
	LiveURL string
	Undone  bool
	// ThreadURL is the owner's page of the thread (signed for them: its instructions and
	// replies, progress, pictures, publish and undo); every reply about a job links it.
	ThreadURL string
	// PublishURL (Done) is a signed, single-use link that publishes the thread; with
	// Publishable the reply also says that replying "publish" does it.
	PublishURL  string
	Publishable bool
	// Images are pictures of the change (Done); the reply shows one, below the preview button.
	Images []Image
	// NoChanges (Done) says the agent changed no file: the reply says so rather than "done".
	NoChanges bool
	// ModelBusy (Waiting) says the job waits for a busy model service; Retrying, that it
	// failed once and waits to run again; Behind, that the sender's earlier requests run
	// first; none, that other work does.
	ModelBusy, Retrying, Behind bool
	// LeftOut (Done) are what the platform would not save, each with why, in the owner's words
	// ("sub/ (a git repository inside your site)"); the reply lists them whatever the summary's
	// length.
	LeftOut []string
}

// validate checks the fields Compose cannot do without.
func (r Reply) validate() error {
	if !slices.Contains(Kinds, r.Kind) {
		return fmt.Errorf("unknown reply kind %q", r.Kind)
	}
	if r.To.Address == "" {
		return errors.New("reply has no To address")
	}
	if r.From.Address == "" {
		return errors.New("reply has no From address")
	}
	if r.MessageID == "" && r.JobID == "" && r.InReplyTo == "" {
		return errors.New("reply needs a MessageID, JobID or InReplyTo to derive a stable Message-ID")
	}
	return nil
}

// replyPrefix matches reply prefixes in several languages: Re, Aw (German), Sv (Nordic),
// Antw (Dutch), Vs (Finnish), Odp (Polish), optionally numbered as in "Re[2]:".
var replyPrefix = regexp.MustCompile(`(?i)^\s*(re|aw|sv|antw|vs|odp)\s*(\[\d+\]|\(\d+\))?\s*:\s*`)

// replySubject returns "Re: " and the subject without any reply prefixes it already had.
func replySubject(subject string) string {
	s := oneLine(subject)
	for {
		loc := replyPrefix.FindStringIndex(s)
		if loc == nil {
			break
		}
		s = s[loc[1]:]
	}
	if s = strings.TrimSpace(s); s == "" {
		s = "(no subject)"
	}
	return "Re: " + s
}

// maxReferences bounds the References header of long threads (RFC 5322 3.6.4 allows trimming:
// the first id is kept, then the most recent ones).
const maxReferences = 20

// references returns the thread's ids, cleaned, deduplicated and ending with inReplyTo.
func references(refs []string, inReplyTo string) []string {
	var out []string
	for _, r := range append(slices.Clone(refs), inReplyTo) {
		if id := cleanID(r); id != "" && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	if len(out) > maxReferences {
		out = append(out[:1], out[len(out)-maxReferences+1:]...)
	}
	return out
}

// cleanID strips whitespace and angle brackets from a Message-ID.
func cleanID(id string) string {
	id = strings.TrimSpace(oneLine(id))
	return strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(id, "<"), ">"))
}

// messageID returns the reply's Message-ID, derived when not given.
func (r Reply) messageID() string {
	if id := cleanID(r.MessageID); id != "" {
		return id
	}
	return "wo-" + r.idStem() + "-" + string(r.Kind) + "@" + domainOf(r.From.Address)
}

// idStem is the job id made safe for a Message-ID, or a digest of the message replied to.
func (r Reply) idStem() string {
	if r.JobID != "" {
		return idSafe.ReplaceAllString(r.JobID, "-")
	}
	sum := sha256.Sum256([]byte(cleanID(r.InReplyTo)))
	return "m" + hex.EncodeToString(sum[:8])
}

// idSafe matches characters not allowed in the left part of our Message-IDs.
var idSafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// domainOf returns the domain of an address, or "localhost" if it has none.
func domainOf(addr string) string {
	if i := strings.LastIndexByte(addr, '@'); i >= 0 && i < len(addr)-1 {
		return addr[i+1:]
	}
	return "localhost"
}

// replyTo formats the Reply-To header value, borrowing From's display name when it has none.
func (r Reply) replyTo() (string, error) {
	if strings.TrimSpace(r.ReplyTo) == "" {
		return "", nil
	}
	a, err := mail.ParseAddress(oneLine(r.ReplyTo))
	if err != nil {
		return "", fmt.Errorf("reply-to %q: %w", r.ReplyTo, err)
	}
	if a.Name == "" {
		a.Name = r.From.Name
	}
	return a.String(), nil
}

// oneLine replaces line breaks, so a value cannot start a new header.
func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(s)
}
