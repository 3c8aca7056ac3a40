package natsjs

import (
	"context"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/webordinary/webordinary/internal/broker"
)

// The schemes this package registers with broker.Open.
const (
	// SchemeEmbedded is an engine in this process: embedded:///abs/dir (JetStream's files in dir).
	SchemeEmbedded = "embedded"
	// SchemeNATS is an external NATS server or cluster: nats://host:4222[,nats://host2:4222],
	// optionally followed by ?replicas=N (Config.Replicas; default: the existing streams', else
	// 3 on a cluster and 1 on a single server).
	SchemeNATS = "nats"
	// SchemeTLS is SchemeNATS over TLS.
	SchemeTLS = "tls"
)

func init() {
	broker.Register(SchemeEmbedded, openEmbedded)
	broker.Register(SchemeNATS, openExternal)
	broker.Register(SchemeTLS, openExternal)
}

// EmbeddedURL is the embedded engine's URL for the directory dir (absolute).
func EmbeddedURL(dir string) string {
	return (&neturl.URL{Scheme: SchemeEmbedded, Path: dir}).String()
}

// embeddedDir is the directory of an embedded:///abs/dir URL.
func embeddedDir(url string) (string, error) {
	u, err := neturl.Parse(url)
	if err != nil {
		return "", fmt.Errorf("natsjs: %w", err)
	}
	if u.Host != "" || !filepath.IsAbs(u.Path) || u.RawQuery != "" {
		return "", fmt.Errorf("natsjs: %q: want embedded:///absolute/directory", url)
	}
	return filepath.Clean(u.Path), nil
}

// openEmbedded starts an engine on the URL's directory and connects to it in-process. Close
// closes the connection and shuts the engine down.
func openEmbedded(ctx context.Context, url string, opts broker.Options) (*broker.Backend, error) {
	dir, err := embeddedDir(url)
	if err != nil {
		return nil, err
	}
	srv, err := StartServer(ServerConfig{Dir: dir, NoSync: opts.NoSync, Listen: opts.Listen, User: opts.User, Password: opts.Password})
	if err != nil {
		return nil, err
	}
	stop := func() { srv.Shutdown(); srv.WaitForShutdown() }
	nc, err := ConnectInProcess(srv, opts.User, opts.Password)
	if err != nil {
		stop()
		return nil, err
	}
	b, err := owning(ctx, nc, Config{Replicas: 1, Logger: opts.Logger}, stop)
	if err != nil {
		return nil, err
	}
	b.Describe = "embedded NATS in " + dir + " (in-process only)"
	if opts.Listen != "" {
		b.Endpoint = srv.ClientURL()
		b.Describe = "embedded NATS in " + dir + ", workers may join at " + b.Endpoint
	}
	return b, nil
}

// openExternal connects to a NATS server or cluster; opts' credentials are sent unless the
// URL carries its own.
func openExternal(ctx context.Context, url string, opts broker.Options) (*broker.Backend, error) {
	url, cfg, err := externalConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.Logger = opts.Logger
	var nopts []nats.Option
	if opts.User != "" && !HasUserInfo(url) {
		nopts = append(nopts, nats.UserInfo(opts.User, opts.Password))
	}
	nc, err := Connect(url, "webordinary", nopts...)
	if err != nil {
		return nil, err
	}
	b, err := owning(ctx, nc, cfg, func() {})
	if err != nil {
		return nil, err
	}
	b.Describe, b.Endpoint = "NATS at "+nc.ConnectedUrlRedacted(), redact(url)
	if name := nc.ConnectedClusterName(); name != "" {
		b.Describe += " (cluster " + name + ")"
	}
	return b, nil
}

// externalConfig splits the options off an external engine's URL list: the query after the
// last URL (only replicas=N, 1–5) applies to them all.
func externalConfig(url string) (string, Config, error) {
	var cfg Config
	i := strings.LastIndexByte(url, '?')
	if i < 0 || strings.LastIndexByte(url, ',') > i {
		return url, cfg, nil
	}
	q, err := neturl.ParseQuery(url[i+1:])
	if err != nil {
		return "", cfg, fmt.Errorf("natsjs: %q: %w", redact(url), err)
	}
	for k, v := range q {
		if k != "replicas" {
			return "", cfg, fmt.Errorf("natsjs: %q: unknown option %q (known: replicas)", redact(url[:i]), k)
		}
		n, err := strconv.Atoi(v[len(v)-1])
		if err != nil || n < 1 || n > 5 {
			return "", cfg, fmt.Errorf("natsjs: %q: replicas=%s: want 1 to 5 (3 on a cluster of three)", redact(url[:i]), v[len(v)-1])
		}
		cfg.Replicas = n
	}
	return url[:i], cfg, nil
}

// owning sets up the backend on nc; its Close closes nc, then calls stop.
func owning(ctx context.Context, nc *nats.Conn, cfg Config, stop func()) (*broker.Backend, error) {
	b, err := New(ctx, nc, cfg)
	if err != nil {
		nc.Close()
		stop()
		return nil, err
	}
	closeBackend := b.Close
	b.Close = func() error {
		_ = closeBackend()
		nc.Close()
		stop()
		return nil
	}
	return b, nil
}

// HasUserInfo reports whether a NATS URL (or the first of several) carries credentials.
func HasUserInfo(urls string) bool {
	first, _, _ := strings.Cut(urls, ",")
	u, err := neturl.Parse(strings.TrimSpace(first))
	return err == nil && u.User != nil
}

// checkFree fails at once, naming the address, when a fixed listen address is taken (the
// server would otherwise only fail to become ready).
func checkFree(listen string) error {
	if _, port, _ := net.SplitHostPort(listen); port == "0" || port == "-1" {
		return nil
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) {
			err = op.Err
		}
		return fmt.Errorf("natsjs: listen %s: %w", listen, err)
	}
	return ln.Close()
}
