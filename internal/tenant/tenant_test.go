package tenant_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/tenant"
)

func TestNew(t *testing.T) {
	t.Parallel()
	cases := []struct {
		project, user string
		wantErr       error
	}{
		{"site", "alice", nil},
		{"a", "0", nil},
		{"my-site-2", "bob-smith", nil},
		{strings.Repeat("a", 63), "u", nil},
		{strings.Repeat("a", 64), "u", tenant.ErrInvalid},
		{"", "u", tenant.ErrInvalid},
		{"-site", "u", tenant.ErrInvalid},
		{"Site", "u", tenant.ErrInvalid},
		{"site", "al.ice", tenant.ErrInvalid},
		{"site", "al_ice", tenant.ErrInvalid},
		{"site", "a/b", tenant.ErrInvalid},
		{"../x", "u", tenant.ErrInvalid},
	}
	for _, c := range cases {
		id, err := tenant.New(c.project, c.user)
		if !errors.Is(err, c.wantErr) {
			t.Errorf("New(%q, %q) error = %v, want %v", c.project, c.user, err, c.wantErr)
			continue
		}
		if err == nil {
			back, err := tenant.Parse(id.String())
			if err != nil || back != id {
				t.Errorf("Parse(%q) = %v, %v", id.String(), back, err)
			}
			back, err = tenant.ParseSubject(id.Subject())
			if err != nil || back != id {
				t.Errorf("ParseSubject(%q) = %v, %v", id.Subject(), back, err)
			}
		}
	}
}

func TestErrorSuggestsValidID(t *testing.T) {
	t.Parallel()
	_, err := tenant.New("My Site!", "alice")
	if err == nil || !strings.Contains(err.Error(), `"my-site"`) {
		t.Fatalf("error %v does not suggest my-site", err)
	}
}
