package outbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestDirWritesParseableEML(t *testing.T) {
	t.Parallel()
	d := Dir{Path: filepath.Join(t.TempDir(), "outbox")}
	msg := composeSample(t, "job-dir")
	if err := d.Send(context.Background(), "edit@example.com", []string{"owner@example.org"}, msg); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(d.Path)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "wo-job-dir-done@example.com.eml" {
		t.Fatalf("dir holds %v, want just wo-job-dir-done@example.com.eml", entries)
	}
	raw, err := os.ReadFile(filepath.Join(d.Path, entries[0].Name()))
	if err != nil {
		t.Fatal(err)
	}
	p := parse(t, raw)
	if p.Header.Get("Message-ID") != "<wo-job-dir-done@example.com>" || p.Text == "" || p.HTML == "" {
		t.Errorf("parsed back: Message-ID %q, text %d bytes, html %d bytes", p.Header.Get("Message-ID"), len(p.Text), len(p.HTML))
	}
}

func TestDirRejects(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		msg  []byte
		want error
	}{
		{"no message id", context.Background(), []byte("Subject: hi\r\n\r\nbody\r\n"), ErrPermanent},
		{"cancelled", cancelled, composeSample(t, "job-c"), context.Canceled},
	}
	for _, tt := range tests {
		err := Dir{Path: t.TempDir()}.Send(tt.ctx, "a@example.com", []string{"b@example.com"}, tt.msg)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestFileName(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"wo-1-done@example.com": "wo-1-done@example.com",
		"../../etc/passwd":      "_._.._etc_passwd",
		"a b/c\\d@x":            "a_b_c_d@x",
	}
	for in, want := range tests {
		if got := fileName(in); got != want {
			t.Errorf("fileName(%q) = %q, want %q", in, got, want)
		}
	}
}
