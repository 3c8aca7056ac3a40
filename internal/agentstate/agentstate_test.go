package agentstate_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/webordinary/webordinary/internal/agentstate"
	"github.com/webordinary/webordinary/internal/broker/mem"
	"github.com/webordinary/webordinary/internal/tenant"
)

var ann = tenant.ID{Project: "site", User: "ann"}

func setup(t *testing.T) *agentstate.Store {
	t.Helper()
	b := mem.New(mem.Config{})
	t.Cleanup(func() { _ = b.Close() })
	s, err := agentstate.Open(t.Context(), b, 0)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func read(root, rel string) string {
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		return "<missing>"
	}
	return string(b)
}

func TestSessionTravelsCachesAndSecretsDoNot(t *testing.T) {
	t.Parallel()
	s := setup(t)
	a, b := t.TempDir(), t.TempDir()
	write(t, a, map[string]string{
		"agent/projects/x/s1.jsonl": "session", "home/.config/app.json": "cfg",
		"home/.npm/_cacache/big": "cache", "agent/.credentials.json": "secret", "git/git-askpass.sh": "askpass",
		"build/install.lockhash": "stamp", "home/site/node_modules/m.js": "mod",
	})
	if err := os.Symlink("/etc/passwd", filepath.Join(a, "home", "link")); err != nil {
		t.Fatal(err)
	}
	write(t, b, map[string]string{"agent/.credentials.json": "b's own", "agent/stale.txt": "old", "home/.cache/x": "b's cache"})
	st, err := s.Save(t.Context(), ann, a)
	if err != nil || st.Files != 2 {
		t.Fatalf("save: expected 2 files, got %+v, %v", st, err)
	}
	restored, _, err := s.Restore(t.Context(), ann, b)
	if err != nil || !restored {
		t.Fatalf("restore: expected restored, got %v, %v", restored, err)
	}
	want := map[string]string{
		"agent/projects/x/s1.jsonl": "session", "home/.config/app.json": "cfg",
		"agent/.credentials.json": "b's own", "home/.cache/x": "b's cache", // local-only entries stay
		"agent/stale.txt": "<missing>", "home/.npm/_cacache/big": "<missing>", "git/git-askpass.sh": "<missing>",
		"build/install.lockhash": "<missing>", "home/site/node_modules/m.js": "<missing>", "home/link": "<missing>",
	}
	for rel, w := range want {
		if got := read(b, rel); got != w {
			t.Errorf("%s: expected %q, got %q", rel, w, got)
		}
	}
	if again, _, err := s.Restore(t.Context(), ann, b); err != nil || again {
		t.Fatalf("restore of the current version: expected nothing to do, got %v, %v", again, err)
	}
}

func TestStaleLocalCopyIsReplaced(t *testing.T) {
	t.Parallel()
	s := setup(t)
	a, b := t.TempDir(), t.TempDir()
	write(t, a, map[string]string{"agent/s.jsonl": "turn 1"})
	mustSave(t, s, a)
	if _, _, err := s.Restore(t.Context(), ann, b); err != nil {
		t.Fatal(err)
	}
	write(t, b, map[string]string{"agent/s.jsonl": "turn 1\nturn 2"}) // b runs job 2 and saves
	mustSave(t, s, b)
	if restored, _, err := s.Restore(t.Context(), ann, a); err != nil || !restored || read(a, "agent/s.jsonl") != "turn 1\nturn 2" {
		t.Fatalf("a's stale copy: expected turn 2 restored, got %v %q %v", restored, read(a, "agent/s.jsonl"), err)
	}
	if restored, _, err := s.Restore(t.Context(), tenant.ID{Project: "site", User: "bob"}, t.TempDir()); err != nil || restored {
		t.Fatalf("a tenant with nothing stored: expected nothing restored, got %v, %v", restored, err)
	}
}

func mustSave(t *testing.T, s *agentstate.Store, root string) {
	t.Helper()
	if _, err := s.Save(t.Context(), ann, root); err != nil {
		t.Fatal(err)
	}
}

func TestOverMaxBytesKeepsPrevious(t *testing.T) {
	t.Parallel()
	s := setup(t)
	a := t.TempDir()
	write(t, a, map[string]string{"agent/s.jsonl": "small"})
	mustSave(t, s, a)
	noise := make([]byte, 2<<20)
	_, _ = rand.Read(noise)
	write(t, a, map[string]string{"home/noise": string(noise)})
	s.MaxBytes = 1 << 20
	if _, err := s.Save(t.Context(), ann, a); !errors.Is(err, agentstate.ErrTooLarge) {
		t.Fatalf("expected ErrTooLarge, got %v", err)
	}
	b := t.TempDir()
	if _, _, err := s.Restore(t.Context(), ann, b); err != nil || read(b, "agent/s.jsonl") != "small" || read(b, "home/noise") != "<missing>" {
		t.Fatalf("expected the previous state, got %q, %v", read(b, "agent/s.jsonl"), err)
	}
}

func TestUnpackRefusesHostileArchives(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		hdr  tar.Header
	}{
		{"parent", tar.Header{Name: "agent/../../x", Typeflag: tar.TypeReg, Size: 1}},
		{"absolute", tar.Header{Name: "/agent/x", Typeflag: tar.TypeReg, Size: 1}},
		{"other top", tar.Header{Name: "git/git-askpass.sh", Typeflag: tar.TypeReg, Size: 1}},
		{"symlink", tar.Header{Name: "agent/l", Typeflag: tar.TypeSymlink, Linkname: "/etc"}},
		{"hard link", tar.Header{Name: "agent/l", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			tw := tar.NewWriter(zw)
			c.hdr.Mode = 0o644
			_ = tw.WriteHeader(&c.hdr)
			if c.hdr.Size > 0 {
				_, _ = tw.Write([]byte("x"))
			}
			_ = tw.Close()
			_ = zw.Close()
			dst := filepath.Join(t.TempDir(), "out")
			if _, err := agentstate.Unpack(buf.Bytes(), dst); err == nil {
				t.Fatalf("expected %q to be refused", c.hdr.Name)
			}
		})
	}
}
