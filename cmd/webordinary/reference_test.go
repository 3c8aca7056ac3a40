package main

import (
	"os"
	"strings"
	"testing"
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
