package auth_test

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/webordinary/webordinary/internal/mail/auth"
)

func ExampleCheck() {
	dns := &auth.StaticResolver{TXT: map[string][]string{
		"example.com":        {"v=spf1 ip4:192.0.2.0/24 -all"},
		"_dmarc.example.com": {"v=DMARC1; p=reject"},
	}}
	raw := []byte("From: Owner <owner@example.com>\r\nSubject: hours\r\n\r\nOpen 9-17.\r\n")
	for _, ip := range []string{"192.0.2.10", "203.0.113.9"} {
		env := auth.Envelope{RemoteIP: net.ParseIP(ip), MailFrom: "owner@example.com"}
		v, err := auth.Check(context.Background(), auth.Config{Resolver: dns}, auth.RequireAligned, raw, env)
		switch {
		case errors.Is(err, auth.ErrTemporary):
			fmt.Println("defer:", v.Reason)
		case err != nil:
			fmt.Println("refuse:", v.Reason)
		default:
			fmt.Println("accept:", v.Reason)
		}
	}
	// Output:
	// accept: SPF pass for 192.0.2.10 (MAIL FROM domain example.com), aligned with the From domain example.com
	// refuse: no DKIM signature from example.com and SPF fail for 203.0.113.9 (MAIL FROM domain example.com): the message may be spoofed
}
