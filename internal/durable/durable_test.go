package durable_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/webordinary/webordinary/internal/durable"
)

func TestWriteReplaceRemove(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, v := range []string{"one", "two"} {
		if err := durable.WriteFile(dir, "f", []byte(v)); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, "f")); string(got) != v {
			t.Fatalf("read %q, want %q", got, v)
		}
	}
	_ = os.WriteFile(filepath.Join(dir, durable.TempPrefix+"left"), nil, 0o600)
	if err := durable.RemoveTemps(dir); err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent
		if err := durable.Remove(dir, "f"); err != nil {
			t.Fatal(err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
}
