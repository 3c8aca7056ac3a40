package natsjs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/webordinary/webordinary/internal/broker/natsjs"
	"github.com/webordinary/webordinary/internal/broker/natsjs/natsjstest"
)

// TestServerRequiresCredentials: a listening engine refuses a client without the user and
// password (any local process can reach loopback) and admits one with them.
func TestServerRequiresCredentials(t *testing.T) {
	t.Parallel()
	env := natsjstest.Start(t, natsjstest.Options{Listen: true, NoSync: true})
	bare := env.Server.ClientURL()
	cases := []struct {
		name    string
		url     string
		opts    []nats.Option
		wantErr error
	}{
		{"no credentials", bare, nil, nats.ErrAuthorization},
		{"wrong password", bare, []nats.Option{nats.UserInfo(env.User, "guess")}, nats.ErrAuthorization},
		{"user info", bare, []nats.Option{nats.UserInfo(env.User, env.Password)}, nil},
		{"in the URL", env.URL, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			nc, err := natsjs.Connect(tc.url, "test", append(tc.opts, nats.MaxReconnects(0))...)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("connect: %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				if strings.Contains(err.Error(), env.Password) {
					t.Errorf("error shows the password: %v", err)
				}
				return
			}
			defer nc.Close()
			if err := nc.Publish("wo.in.other.tenant", []byte("x")); err != nil {
				t.Fatalf("publish with credentials: %v", err)
			}
		})
	}
}

// TestServerRefusesListeningWithoutCredentials: Listen without a user and password is a
// configuration error, loopback included.
func TestServerRefusesListeningWithoutCredentials(t *testing.T) {
	t.Parallel()
	for _, cfg := range []natsjs.ServerConfig{
		{Dir: t.TempDir(), Listen: "127.0.0.1:-1"},
		{Dir: t.TempDir(), Listen: "127.0.0.1:-1", User: "u"},
		{Dir: t.TempDir(), Listen: "0.0.0.0:-1", Password: "p"},
	} {
		if s, err := natsjs.StartServer(cfg); err == nil {
			s.Shutdown()
			t.Errorf("StartServer(%+v) started; want a refusal", cfg)
		}
	}
}
