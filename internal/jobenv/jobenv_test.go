package jobenv_test

import (
	"slices"
	"testing"

	"github.com/webordinary/webordinary/internal/jobenv"
)

func TestParseRefusesThePlatformsOwnAndBadNames(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"WO_GIT_TOKEN", "wo_nats_password=x", "WO_TOKEN=abc", "", "1ABC", "A-B=c", "=v"} {
		if _, err := jobenv.Parse([]string{bad}); err == nil {
			t.Errorf("Parse(%q) accepted it", bad)
		}
	}
	vars, err := jobenv.Parse([]string{"ANTHROPIC_AUTH_TOKEN", "HTTPS_PROXY=http://proxy:3128", "EMPTY="})
	if err != nil {
		t.Fatal(err)
	}
	want := []jobenv.Var{{Name: "ANTHROPIC_AUTH_TOKEN"}, {Name: "HTTPS_PROXY", Value: "http://proxy:3128", Set: true}, {Name: "EMPTY", Set: true}}
	if !slices.Equal(vars, want) {
		t.Errorf("Parse = %+v, want %+v", vars, want)
	}
}

func TestEnvironTakesOnlyWhatIsNamed(t *testing.T) {
	t.Parallel()
	platform := map[string]string{"PATH": "/usr/bin", "WO_GIT_TOKEN": "secret", "ANTHROPIC_AUTH_TOKEN": "tok", "LANG": "C"}
	lookup := func(k string) (string, bool) { v, ok := platform[k]; return v, ok }
	vars, _ := jobenv.Parse([]string{"ANTHROPIC_AUTH_TOKEN", "LANG=en_US.UTF-8", "MISSING"})
	got := jobenv.Environ(lookup, []string{"PATH", "LANG"}, vars)
	want := []string{"PATH=/usr/bin", "LANG=en_US.UTF-8", "ANTHROPIC_AUTH_TOKEN=tok"}
	if !slices.Equal(got, want) {
		t.Errorf("Environ = %q, want %q", got, want)
	}
}
