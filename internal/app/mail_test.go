package app

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/webordinary/webordinary/internal/broker"
)

// TestReplySecretIsTheEngines: without a configured secret, every serve on one engine signs
// reply tokens with the same secret whatever its data directory; the first one stores the
// secret an older serve kept in its data directory, so the tokens that serve handed out keep
// working; a configured secret wins.
func TestReplySecretIsTheEngines(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b, err := broker.Open(ctx, "mem://", broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	older := t.TempDir()
	kept := bytes.Repeat([]byte("ab"), 32)
	if err := os.WriteFile(filepath.Join(older, "mail-secret"), kept, 0o600); err != nil {
		t.Fatal(err)
	}
	first, err := loadMailSecret(ctx, b, "", older)
	if err != nil || !bytes.Equal(first, kept) {
		t.Fatalf("first serve: %q, %v; want the data directory's %q", first, err, kept)
	}
	restarted, err := loadMailSecret(ctx, b, "", t.TempDir())
	if err != nil || !bytes.Equal(restarted, kept) {
		t.Fatalf("serve on an empty data directory: %q, %v; want the engine's %q", restarted, err, kept)
	}
	if got, err := loadMailSecret(ctx, b, "configured-secret-0123", t.TempDir()); err != nil || string(got) != "configured-secret-0123" {
		t.Fatalf("configured secret: %q, %v", got, err)
	}
}

// TestAFreshReplySecretIsStoredOnce: on a new engine, two serves with empty data directories
// agree on one fresh secret.
func TestAFreshReplySecretIsStoredOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b, err := broker.Open(ctx, "mem://", broker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	one, err := loadMailSecret(ctx, b, "", t.TempDir())
	if err != nil || len(one) < 32 {
		t.Fatalf("fresh secret %q, %v", one, err)
	}
	two, err := loadMailSecret(ctx, b, "", t.TempDir())
	if err != nil || !bytes.Equal(one, two) {
		t.Fatalf("second serve: %q, %v; want %q", two, err, one)
	}
}
