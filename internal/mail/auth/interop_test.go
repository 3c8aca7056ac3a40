package auth

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/webordinary/webordinary/internal/capability"
)

// TestInteropDkimsign signs with python3-dkim's dkimsign (another implementation) and verifies
// here. CI installs python3-dkim; elsewhere the test is skipped.
func TestInteropDkimsign(t *testing.T) {
	t.Parallel()
	capability.Need(t, capability.Dkimsign)
	dkimsign, err := exec.LookPath("dkimsign")
	if err != nil {
		t.Fatal(err)
	}
	f := setup(t)
	tests := []struct {
		name     string
		args     []string
		selector string
		wantErr  error
		wantDKIM string
	}{
		{"rsa-sha256 relaxed/simple", []string{"--signalg", "rsa-sha256"}, "rsa", nil, "pass"},
		{"rsa-sha256 simple/relaxed", []string{"--hcanon", "simple", "--bcanon", "relaxed"}, "rsa", nil, "pass"},
		{"ed25519-sha256", []string{"--signalg", "ed25519-sha256"}, "ed", nil, "pass"},
		{"rsa-sha1 is refused", []string{"--signalg", "rsa-sha1"}, "rsa", ErrUnauthenticated, "permerror"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			keyFile := writeDkimsignKey(t, f, tc.selector)
			args := append(tc.args, tc.selector, "example.com", keyFile)
			raw := runDkimsign(t, dkimsign, args, newMessage(instructions, from("Owner <owner@example.com>")))
			v, err := f.check(t, RequireDKIM, raw, Envelope{})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) || len(v.DKIM) != 1 || v.DKIM[0].Result != tc.wantDKIM {
				t.Fatalf("err = %v, want %v; dkim %+v\n%s", err, tc.wantErr, v.DKIM, raw)
			}
		})
	}
}

// writeDkimsignKey writes the fixture key in dkimpy's format: PKCS#1 PEM for RSA, the base64
// seed for ed25519.
func writeDkimsignKey(t *testing.T, f *fixture, selector string) string {
	t.Helper()
	data := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(f.rsa)})
	if selector == "ed" {
		data = []byte(base64.StdEncoding.EncodeToString(f.ed.Seed()))
	}
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runDkimsign signs raw. dkimsign prints the unsigned message (exit 0) when it fails, so a missing
// signature is an error here.
func runDkimsign(t *testing.T, dkimsign string, args []string, raw []byte) []byte {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), dkimsign, args...)
	cmd.Stdin = bytes.NewReader(raw)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || !bytes.HasPrefix(out, []byte("DKIM-Signature:")) {
		t.Fatalf("dkimsign %v: %v %s", args, err, stderr.Bytes())
	}
	return out
}
