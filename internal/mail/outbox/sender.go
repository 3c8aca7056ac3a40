package outbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/mail"
	"os"
	"regexp"
	"strings"

	"github.com/webordinary/webordinary/internal/durable"
)

// Delivery failures are classified with these sentinels (test with errors.Is). A Sender wraps
// every failure except a cancelled context in exactly one of them.
var (
	// ErrPermanent: the message was rejected and resending it will not help (SMTP 5xx to MAIL,
	// RCPT or DATA; a message that cannot be read). The outbox parks it in failed/.
	ErrPermanent = errors.New("permanent delivery failure")
	// ErrTemporary: the message may go through later (SMTP 4xx, network, TLS or authentication
	// trouble, a full disk). The outbox retries it with backoff.
	ErrTemporary = errors.New("temporary delivery failure")
)

// Sender delivers one composed message to the envelope recipients.
//
// Send blocks until the message is accepted or refused, at most until ctx ends (plus the
// implementation's own timeout); when ctx ends first it returns ctx.Err() unwrapped and the
// message may or may not have been delivered. Otherwise a failure wraps [ErrPermanent] or
// [ErrTemporary]. Send does not retry: that is the [Outbox]'s job. Implementations are safe for
// concurrent use. Sending the same message twice delivers it twice; receivers recognize the
// duplicate by its Message-ID.
type Sender interface {
	Send(ctx context.Context, from string, to []string, msg []byte) error
}

// permanent and temporary wrap err with a classification and what was being done.
func permanent(what string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrPermanent, what, err)
}

func temporary(what string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrTemporary, what, err)
}

// ErrNoMessageID is returned for a message without a Message-ID header: the outbox needs it to
// recognize duplicates.
var ErrNoMessageID = errors.New("message has no Message-ID header; build it with Compose")

// messageIDOf reads the Message-ID (without angle brackets) from a message's header.
func messageIDOf(msg []byte) (string, error) {
	m, err := mail.ReadMessage(bytes.NewReader(msg))
	if err != nil {
		return "", fmt.Errorf("read message header: %w", err)
	}
	id := cleanID(m.Header.Get("Message-ID"))
	if id == "" {
		return "", ErrNoMessageID
	}
	return id, nil
}

// Dir is the development outbox: a Sender that writes each message to Path/<message-id>.eml,
// atomically (temporary file, fsync, rename), creating Path if needed. The envelope is not
// recorded. Sending the same message again overwrites the file.
type Dir struct {
	// Path is the directory the .eml files go to.
	Path string
}

var _ Sender = Dir{}

// Send writes msg to the directory. A message without a Message-ID is a permanent failure; a
// file system error is a temporary one.
func (d Dir) Send(ctx context.Context, _ string, _ []string, msg []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	id, err := messageIDOf(msg)
	if err != nil {
		return permanent("dir outbox", err)
	}
	if err := os.MkdirAll(d.Path, 0o755); err != nil {
		return temporary("dir outbox", err)
	}
	if err := durable.WriteFile(d.Path, fileName(id)+".eml", msg); err != nil {
		return temporary("dir outbox", err)
	}
	return nil
}

// unsafeFileChars matches characters kept out of file names.
var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9@+=._-]+`)

// fileName makes a Message-ID usable as a file name.
func fileName(id string) string {
	name := unsafeFileChars.ReplaceAllString(id, "_")
	if strings.HasPrefix(name, ".") {
		name = "_" + name[1:]
	}
	return name
}
