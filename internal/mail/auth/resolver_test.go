package auth

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"
)

func TestLoadStaticResolver(t *testing.T) {
	t.Parallel()
	const fixture = `{
		"txt": {"Example.COM.": ["v=spf1 mx -all"]},
		"mx": {"example.com": [{"Host": "mx.example.com.", "Pref": 10}]},
		"ip": {"mx.example.com": ["192.0.2.10", "2001:db8::1"]},
		"ptr": {"192.0.2.10": ["mx.example.com."]},
		"tempfail": ["_dmarc.example.com"]
	}`
	r, err := LoadStaticResolver(strings.NewReader(fixture))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	txt, err := r.LookupTXT(ctx, "example.com")
	if err != nil || !reflect.DeepEqual(txt, []string{"v=spf1 mx -all"}) {
		t.Errorf("txt = %v, %v", txt, err)
	}
	ips, err := r.LookupIPAddr(ctx, "MX.example.com.")
	if err != nil || len(ips) != 2 || !ips[1].IP.Equal(net.ParseIP("2001:db8::1")) {
		t.Errorf("ip = %v, %v", ips, err)
	}
	mxs, err := r.LookupMX(ctx, "example.com")
	if err != nil || len(mxs) != 1 || mxs[0].Pref != 10 {
		t.Errorf("mx = %v, %v", mxs, err)
	}
	if names, err := r.LookupAddr(ctx, "192.0.2.10"); err != nil || len(names) != 1 {
		t.Errorf("ptr = %v, %v", names, err)
	}
}

func TestLoadStaticResolverRejectsTypos(t *testing.T) {
	t.Parallel()
	if _, err := LoadStaticResolver(strings.NewReader(`{"text": {}}`)); err == nil {
		t.Fatal("unknown field accepted")
	}
}

func TestStaticResolverErrors(t *testing.T) {
	t.Parallel()
	r := &StaticResolver{TXT: map[string][]string{"a.example": {"x"}}, TempFail: []string{"slow.example"}}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name         string
		ctx          context.Context
		lookup       string
		wantNotFound bool
		wantTemp     bool
		wantErr      error
	}{
		{name: "found", ctx: context.Background(), lookup: "a.example"},
		{name: "missing", ctx: context.Background(), lookup: "b.example", wantNotFound: true},
		{name: "temporary", ctx: context.Background(), lookup: "Slow.Example.", wantTemp: true},
		{name: "canceled", ctx: canceled, lookup: "a.example", wantErr: context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := r.LookupTXT(tc.ctx, tc.lookup)
			if isNotFound(err) != tc.wantNotFound || isTemporary(err) != tc.wantTemp {
				t.Errorf("err = %v: notFound %v, temporary %v", err, isNotFound(err), isTemporary(err))
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// wrapping hides the *net.DNSError behind fmt.Errorf, as a custom Resolver might.
type wrapping struct{ Resolver }

func (w wrapping) LookupTXT(ctx context.Context, name string) ([]string, error) {
	v, err := w.Resolver.LookupTXT(ctx, name)
	if err != nil {
		return nil, errors.Join(errors.New("wrapped"), err)
	}
	return v, nil
}

func TestWrappedTemporaryErrorsStayTemporary(t *testing.T) {
	t.Parallel()
	f := setup(t)
	cfg := Config{Resolver: wrapping{f.dns}}
	_, err := Check(context.Background(), cfg, RequireAligned, signed("owner@example.com", "slow", "example.com")(t, f), Envelope{})
	if !errors.Is(err, ErrTemporary) {
		t.Fatalf("err = %v, want ErrTemporary", err)
	}
}
