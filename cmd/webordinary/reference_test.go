package main

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/app"
)

// TestReferenceIsCurrent: docs/REFERENCE.md is what the flags say. After changing a flag,
// regenerate its part between the markers with `go run ./cmd/webordinary reference`.
func TestReferenceIsCurrent(t *testing.T) {
	readme, err := os.ReadFile("../../docs/REFERENCE.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(readme), "<!-- reference:start -->\n")
	got, _, _ := strings.Cut(rest, "<!-- reference:end -->")
	if got != flagReference() {
		t.Fatal("docs/REFERENCE.md is stale: replace what lies between its markers with the output of `go run ./cmd/webordinary reference`")
	}
}

// TestExampleConfigIsTheDefaults: `webordinary config example`, every key uncommented, is a
// valid file that leaves serve's configuration exactly at its defaults.
func TestExampleConfigIsTheDefaults(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	if err := newConfigSet().WriteExample(&b, sectionNotes); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "example.toml")
	text := regexp.MustCompile(`(?m)^(# \(WO_.*\)\n)# `).ReplaceAllString(b.String(), "$1")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	parse := func(args ...string) app.Config {
		fs := newFlags("serve", "")
		p := newProcConfig(app.RoleServe, fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := p.cmd.Apply(func(string) (string, bool) { return "", false }); err != nil {
			t.Fatal(err)
		}
		return p.cfg
	}
	if got, want := parse("--config", file), parse(); !reflect.DeepEqual(got, want) {
		t.Fatalf("the example changes the configuration:\n got %+v\nwant %+v", got, want)
	}
}

// TestFieldErrorsNameKeys: every Config field that app's checks name has a key, so an error
// tells the operator what to set.
func TestFieldErrorsNameKeys(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../internal/app/*.go")
	if err != nil {
		t.Fatal(err)
	}
	p := newProcConfig(app.RoleServe, newFlags("serve", ""))
	field := regexp.MustCompile(`(?:fieldErr\(|Field: )"([A-Z][A-Za-z.]*)"`)
	seen := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range field.FindAllStringSubmatch(string(src), -1) {
			seen++
			if m[1] != "Role" && m[1] != "Worker" && p.cfg.FieldKey(p.set, m[1]) == nil {
				t.Errorf("%s: field %s has no config key", filepath.Base(f), m[1])
			}
		}
	}
	if seen < 20 {
		t.Fatalf("found only %d field errors: has app changed how it names fields?", seen)
	}
}
