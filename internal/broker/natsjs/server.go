package natsjs

import (
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// ServerConfig configures the embedded NATS server.
type ServerConfig struct {
	// Dir holds JetStream's files. Required.
	Dir string
	// NoSync relaxes fsync-per-write (sync_always) to the server's periodic sync: faster, but a
	// power loss can lose the last accepted jobs. Off by default.
	NoSync bool
	// Listen is a host:port to accept clients on (other worker processes); port 0 picks a
	// free one; empty = in-process only.
	Listen string
	// User and Password are required of every client, in-process ones included. Required
	// when Listen is set: the engine never accepts an unauthenticated socket, not even on
	// loopback, where any local process (an agent's job among them) could otherwise reach it.
	User, Password string
	// Name is the server name; default "webordinary".
	Name string
}

func (c ServerConfig) validate() error {
	if c.Dir == "" {
		return errors.New("natsjs: server needs a directory (ServerConfig.Dir)")
	}
	if c.Listen == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("natsjs: listen address %q: %w (use host:port, e.g. 127.0.0.1:4222)", c.Listen, err)
	}
	if c.User == "" || c.Password == "" {
		return fmt.Errorf("natsjs: refusing to listen on %q without credentials: set a user and a password (any local process can reach loopback)", c.Listen)
	}
	return nil
}

// StartServer starts an embedded NATS server with JetStream and waits until it is ready.
func StartServer(cfg ServerConfig) (*server.Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opts, err := serverOptions(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Listen != "" {
		if err := checkFree(cfg.Listen); err != nil {
			return nil, err
		}
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsjs: new server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("natsjs: embedded server not ready after 10s (is the data directory locked by another webordinary?)")
	}
	return s, nil
}

func serverOptions(cfg ServerConfig) (*server.Options, error) {
	name := cfg.Name
	if name == "" {
		name = "webordinary"
	}
	opts := &server.Options{
		ServerName: name,
		JetStream:  true,
		StoreDir:   cfg.Dir,
		SyncAlways: !cfg.NoSync,
		NoSigs:     true,
		NoLog:      true,
		DontListen: cfg.Listen == "",
		// Jobs carry their attachments: 25 MB of mail in base64 JSON fits in 64 MB.
		MaxPayload: 64 << 20,
		Username:   cfg.User,
		Password:   cfg.Password,
	}
	if cfg.Listen != "" {
		host, port, _ := net.SplitHostPort(cfg.Listen)
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("natsjs: listen port %q: %w", port, err)
		}
		if p == 0 {
			p = server.RANDOM_PORT // NATS reads 0 as its default port, 4222
		}
		opts.Host, opts.Port = host, p
	}
	return opts, nil
}

// ConnectInProcess connects to an embedded server without a socket.
func ConnectInProcess(s *server.Server, user, password string) (*nats.Conn, error) {
	opts := []nats.Option{nats.InProcessServer(s), nats.Name("webordinary"), nats.MaxReconnects(-1)}
	if user != "" {
		opts = append(opts, nats.UserInfo(user, password))
	}
	nc, err := nats.Connect("", opts...)
	if err != nil {
		return nil, fmt.Errorf("natsjs: in-process connect: %w", err)
	}
	return nc, nil
}

// Connect connects to an external server or cluster (comma-separated URLs); opts add to the
// defaults, e.g. nats.UserInfo (credentials in the URL take precedence over it).
func Connect(url, name string, opts ...nats.Option) (*nats.Conn, error) {
	opts = append([]nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond)}, opts...)
	nc, err := nats.Connect(url, opts...)
	if errors.Is(err, nats.ErrAuthorization) {
		return nil, fmt.Errorf("natsjs: connect %s: %w (give the server's user and password)", redact(url), err)
	}
	if err != nil {
		return nil, fmt.Errorf("natsjs: connect %s: %w (is `webordinary serve --nats-listen` running there?)", redact(url), err)
	}
	return nc, nil
}

// redact hides the passwords of comma-separated NATS URLs, for messages.
func redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if u, err := neturl.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}
