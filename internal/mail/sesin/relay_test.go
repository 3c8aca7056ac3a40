package sesin

import (
	"context"
	"testing"

	"github.com/webordinary/webordinary/internal/mail/auth"
)

// TestSESMailIsTheRelays: mail from SES's queue comes through SES's own transport, so its
// Authentication-Results decide (the SMTP intake trusts them only from listed relays).
func TestSESMailIsTheRelays(t *testing.T) {
	t.Parallel()
	env := envelopeOf(Notification{})
	if !env.FromRelay {
		t.Fatalf("SES envelope not marked FromRelay: %+v", env)
	}
	raw := []byte("Authentication-Results: amazonses.com; spf=pass smtp.mailfrom=owner@example.com; dkim=pass header.d=example.com; dmarc=pass header.from=example.com\r\n" +
		"From: owner@example.com\r\nTo: edit@edit.example.com\r\nSubject: x\r\nMessage-ID: <ses@x>\r\n\r\nMake it green\r\n")
	v, err := auth.Check(context.Background(), auth.Config{TrustedAuthServID: AuthServID}, auth.RequireAligned, raw,
		auth.Envelope{MailFrom: "owner@example.com", FromRelay: env.FromRelay})
	if err != nil || v.Source != "authentication-results:"+AuthServID {
		t.Fatalf("SES's pass: %v, %+v", err, v)
	}
}
