package intake_test

import (
	"testing"

	"github.com/webordinary/webordinary/internal/mail/intake"
)

func TestRelays(t *testing.T) {
	t.Parallel()
	rs, err := intake.ParseRelays([]string{"192.0.2.25, 10.1.0.0/16", "2001:db8::/32"})
	if err != nil || len(rs) != 3 {
		t.Fatalf("ParseRelays = %v, %v", rs, err)
	}
	for ip, want := range map[string]bool{"192.0.2.25": true, "192.0.2.26": false, "10.1.200.3": true, "10.2.0.1": false,
		"2001:db8::1": true, "::ffff:192.0.2.25": true, "127.0.0.1": false, "": false, "garbage": false} {
		if got := rs.Contains(ip); got != want {
			t.Errorf("Contains(%q) = %v, want %v", ip, got, want)
		}
	}
	for _, bad := range []string{"relay.example.com", "10.0.0.0/33", "192.0.2.300"} {
		if _, err := intake.ParseRelays([]string{bad}); err == nil {
			t.Errorf("ParseRelays(%q) accepted", bad)
		}
	}
}
