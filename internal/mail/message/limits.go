package message

import (
	"errors"
	"fmt"
	"time"

	"github.com/webordinary/webordinary/internal/conf"
)

// ErrBudget is wrapped by the error Parse returns when a message exceeds its [Limits]: nested
// deeper than MaxDepth, larger than MaxBytes, or not parsed within Timeout. Such a message is
// hostile or broken beyond use; it is not worth trying again with the same limits.
var ErrBudget = errors.New("message exceeds the parse budget")

// Defaults of [Limits]. Real mail nests a handful of levels (mixed › related › alternative,
// plus a forwarded message or two) and has a few dozen parts at most.
const (
	DefaultMaxDepth = 20
	DefaultMaxParts = 1000
	DefaultMaxBytes = 64 << 20 // what the engine carries; SMTP refuses more than 25 MB by default
	DefaultTimeout  = 5 * time.Second
)

// Limits bound the work of parsing one message. The zero value means the defaults.
type Limits struct {
	// MaxDepth is the deepest multipart nesting accepted (the top-level multipart is depth 1).
	// A deeper message fails with ErrBudget. Default DefaultMaxDepth.
	MaxDepth int
	// MaxParts is how many MIME parts are parsed; the rest of the message is dropped and a
	// Problem says so (the message is still usable). Default DefaultMaxParts.
	MaxParts int
	// MaxBytes is the largest message parsed; a larger one fails with ErrBudget.
	// Default DefaultMaxBytes.
	MaxBytes int
	// Timeout is the wall-clock budget of one Parse; past it Parse fails with ErrBudget.
	// Default DefaultTimeout.
	Timeout time.Duration
}

// Keys registers the limits an operator sets on s (the mail section), at their defaults.
func (l *Limits) Keys(s *conf.Section) {
	s.Int(&l.MaxDepth, "max_depth", DefaultMaxDepth, "deepest MIME nesting parsed; deeper mail is quarantined").Was("mail-max-depth")
	s.Duration(&l.Timeout, "parse_timeout", DefaultTimeout, "time budget to parse one message; slower mail is quarantined").Was("mail-parse-timeout")
}

func (l Limits) withDefaults() Limits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxParts <= 0 {
		l.MaxParts = DefaultMaxParts
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultTimeout
	}
	return l
}

// truncationProblem describes a cut made at MaxParts.
func truncationProblem(maxParts int) string {
	return fmt.Sprintf("error: more than %d MIME parts; the rest of the message was dropped", maxParts)
}
