package main

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeReferenceIsCurrent: README.md's configuration reference is what the flags say.
// After changing a flag, regenerate it with `go run ./cmd/webordinary reference`.
func TestReadmeReferenceIsCurrent(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(readme), "<!-- reference:start -->\n")
	got, _, _ := strings.Cut(rest, "<!-- reference:end -->")
	if got != flagReference() {
		t.Fatal("README.md's configuration reference is stale: replace it with the output of `go run ./cmd/webordinary reference`")
	}
}
