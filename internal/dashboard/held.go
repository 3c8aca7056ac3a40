package dashboard

import (
	"github.com/webordinary/webordinary/internal/mail/intake"
)

// Held is the SMTP intake's held mail: messages over a sender's limit (*intake.Held).
type Held interface {
	// List lists the held messages, oldest first.
	List() ([]intake.Quarantined, error)
	// Release runs a held message (the limit does not apply to it again).
	Release(id string) error
	// Delete drops a held message for good.
	Delete(id string) error
}
