package preview

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/tenant"
)

func TestSiteValidate(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 64)
	tests := []struct {
		site    Site
		wantErr error
		mention string // a word the error must contain
	}{
		{Site{"acme", "t1"}, nil, ""},
		{Site{"a", "0"}, nil, ""},
		{Site{strings.Repeat("a", 63), "my-thread-2"}, nil, ""},
		{Site{"", "t1"}, tenant.ErrInvalid, "project"},
		{Site{"Acme", "t1"}, tenant.ErrInvalid, "project"},
		{Site{"-acme", "t1"}, tenant.ErrInvalid, "project"},
		{Site{long, "t1"}, tenant.ErrInvalid, "project"},
		{Site{"acme", ""}, tenant.ErrInvalid, "thread"},
		{Site{"acme", "a/b"}, tenant.ErrInvalid, "thread"},
		{Site{"acme", ".."}, tenant.ErrInvalid, "thread"},
		{Site{"acme", "t.1"}, tenant.ErrInvalid, "thread"},
		{Site{"acme", "t_1"}, tenant.ErrInvalid, "thread"},
	}
	for _, tt := range tests {
		err := tt.site.Validate()
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("%+v: Validate() = %v, want %v", tt.site, err, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), tt.mention) {
			t.Errorf("%+v: error %q does not name the %s", tt.site, err, tt.mention)
		}
	}
}

func TestURLs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		site   Site
		port   int
		domain string
		want   []string
	}{
		{Site{"acme", "t1"}, 8080, "", []string{"http://t1.edit.acme.localhost:8080/", "http://edit.acme.localhost:8080/"}},
		{Site{"acme", "t1"}, 0, "example.com", []string{"http://t1.edit.acme.example.com/", "http://edit.acme.example.com/"}},
		{Site{"acme", ""}, 80, "localhost", []string{"http://edit.acme.localhost:80/"}},
	}
	for _, tt := range tests {
		if got := URLs(tt.site, tt.port, tt.domain); !slices.Equal(got, tt.want) {
			t.Errorf("URLs(%+v, %d, %q) = %q, want %q", tt.site, tt.port, tt.domain, got, tt.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, cfg := range []DirConfig{{}, {Root: t.TempDir(), Keep: -1}, {Root: t.TempDir(), Port: 70000}} {
		if _, err := NewDir(cfg); err == nil {
			t.Errorf("NewDir(%+v) succeeded, want an error", cfg)
		}
	}
	if _, err := NewServer(ServerConfig{}); err == nil {
		t.Error("NewServer without Root succeeded, want an error")
	}
}
