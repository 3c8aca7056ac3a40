package dashboard

import (
	"github.com/webordinary/webordinary/internal/mail/intake"
)

// Quarantine is the SMTP intake's quarantine of messages it could not handle (*intake.Server).
type Quarantine interface {
	// Quarantined lists the messages set aside, oldest first.
	Quarantined() ([]intake.Quarantined, error)
	// Release puts a message back in the spool to be handled again.
	Release(id string) error
	// Delete removes a message for good.
	Delete(id string) error
}
