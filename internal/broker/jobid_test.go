package broker

import (
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/tenant"
)

// TestJobIDsCarryTheirTenantsGroup: an id of the older form gets its tenant's group
// appended, the same every time; a grouped id is kept for its tenant and refused for another
// whose group differs; anything else is no job id.
func TestJobIDsCarryTheirTenantsGroup(t *testing.T) {
	alice, bob := tenant.ID{Project: "site", User: "alice"}, tenant.ID{Project: "site", User: "bob"}
	older := NewJobID()
	id, err := JobIDFor(older, alice)
	if err != nil || id != older+JobGroup(alice) {
		t.Fatalf("JobIDFor(%s) = %s, %v; want the id with alice's group", older, id, err)
	}
	if again, _ := JobIDFor(older, alice); again != id {
		t.Errorf("JobIDFor gave %s, then %s", id, again)
	}
	if kept, err := JobIDFor(id, alice); kept != id || err != nil {
		t.Errorf("JobIDFor of a grouped id = %s, %v; want it kept", kept, err)
	}
	if o, ok := OlderJobID(id); !ok || o != older {
		t.Errorf("OlderJobID(%s) = %s, %v; want %s", id, o, ok, older)
	}
	if _, ok := OlderJobID(older); ok {
		t.Errorf("OlderJobID of an id of the older form: want false")
	}
	if JobGroup(alice) != JobGroup(bob) {
		if err := CheckJobID(id, bob); err == nil || !strings.Contains(err.Error(), "another tenant") {
			t.Errorf("alice's id checked for bob: %v; want refused", err)
		}
	}
	for _, ok := range []string{older, id} {
		if !IsJobID(ok) || CheckJobID(ok, alice) != nil {
			t.Errorf("%s: want a job id", ok)
		}
	}
	for _, bad := range []string{"", "j", "x" + older[1:], older[:24], older + "0", strings.ToUpper(id), id[:28] + "g", "j" + strings.Repeat("0", 27) + "."} {
		if IsJobID(bad) {
			t.Errorf("%q: want no job id", bad)
		}
		if _, err := JobIDFor(bad, alice); err == nil {
			t.Errorf("JobIDFor(%q): want an error", bad)
		}
	}
}
