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
	// SchemeEmbedded is an engine in this process: embedded:///abs/dir (JetStream's files in
	// dir). As a member of a cluster of embedded engines (serve on several machines):
	// embedded:///abs/dir?cluster=NAME&cluster_listen=HOST:PORT&routes=HOST:PORT,HOST:PORT,
	// optionally &name=SERVER&replicas=N (see ClusterConfig; replicas as for SchemeNATS).
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

// embedded is what an embedded:// URL says.
type embedded struct {
	dir      string
	name     string
	cluster  *ClusterConfig
	replicas int
}

// parseEmbedded reads embedded:///abs/dir[?cluster=…&cluster_listen=…&routes=…&name=…&replicas=N].
func parseEmbedded(url string) (embedded, error) {
	var e embedded
	u, err := neturl.Parse(url)
	if err != nil {
		return e, fmt.Errorf("natsjs: %w", err)
	}
	if u.Host != "" || !filepath.IsAbs(u.Path) {
		return e, fmt.Errorf("natsjs: %q: want embedded:///absolute/directory", url)
	}
	e.dir = filepath.Clean(u.Path)
	q, err := neturl.ParseQuery(u.RawQuery)
	if err != nil {
		return e, fmt.Errorf("natsjs: %q: %w", url, err)
	}
	var cl ClusterConfig
	for k, v := range q {
		val := v[len(v)-1]
		switch k {
		case "cluster":
			cl.Name = val
		case "cluster_listen":
			cl.Listen = val
		case "routes":
			for _, r := range strings.Split(val, ",") {
				if r = strings.TrimSpace(strings.TrimPrefix(r, "nats-route://")); r != "" {
					cl.Routes = append(cl.Routes, r)
				}
			}
		case "name":
			e.name = val
		case "replicas":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 || n > 5 {
				return e, fmt.Errorf("natsjs: %q: replicas=%s: want 1 to 5 (3 on a cluster of three)", url, val)
			}
			e.replicas = n
		default:
			return e, fmt.Errorf("natsjs: %q: unknown option %q (known: cluster, cluster_listen, routes, name, replicas)", url, k)
		}
	}
	switch {
	case cl.Name == "" && (cl.Listen != "" || len(cl.Routes) > 0):
		return e, fmt.Errorf("natsjs: %q: cluster_listen and routes need cluster=NAME (the same on every member)", url)
	case cl.Name != "" && cl.Listen == "":
		return e, fmt.Errorf("natsjs: %q: a cluster member needs cluster_listen=HOST:PORT, the address the other members connect to", url)
	case cl.Name != "":
		e.cluster = &cl
	case e.replicas > 1:
		return e, fmt.Errorf("natsjs: %q: replicas=%d needs a cluster (cluster=NAME&cluster_listen=…&routes=…)", url, e.replicas)
	}
	return e, nil
}

// EmbeddedCluster reports whether url is an embedded engine that joins a cluster.
func EmbeddedCluster(url string) bool {
	e, err := parseEmbedded(url)
	return err == nil && e.cluster != nil
}

// openEmbedded starts an engine on the URL's directory and connects to it in-process. Close
// closes the connection and shuts the engine down.
func openEmbedded(ctx context.Context, url string, opts broker.Options) (*broker.Backend, error) {
	e, err := parseEmbedded(url)
	if err != nil {
		return nil, err
	}
	dir := e.dir
	srv, err := StartServer(ServerConfig{Dir: dir, NoSync: opts.NoSync, Listen: opts.Listen, User: opts.User, Password: opts.Password,
		Name: e.name, Cluster: e.cluster})
	if err != nil {
		return nil, err
	}
	stop := func() { srv.Shutdown(); srv.WaitForShutdown() }
	nc, err := ConnectInProcess(srv, opts.User, opts.Password)
	if err != nil {
		stop()
		return nil, err
	}
	cfg, where := Config{Replicas: 1, Logger: opts.Logger, EngineID: srv.ID()}, "embedded NATS in "+dir
	if e.cluster != nil {
		// A member sets up once enough members are up to hold the replicas: settle waits.
		cfg.Replicas = e.replicas
		where = fmt.Sprintf("%s, member %s of cluster %s (routes on %s)", where, srv.Name(), e.cluster.Name, e.cluster.Listen)
	}
	b, err := owning(ctx, nc, cfg, stop)
	if err != nil {
		if e.cluster != nil {
			return nil, fmt.Errorf("natsjs: cluster %s (are the other members running, are routes %v reachable from here, "+
				"and are there as many members as replicas? fewer than 3 need replicas=N in the URL): %w", e.cluster.Name, e.cluster.Routes, err)
		}
		return nil, err
	}
	b.Describe = where + " (in-process only)"
	if opts.Listen != "" {
		b.Endpoint = srv.ClientURL()
		b.Describe = where + ", workers may join at " + b.Endpoint
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
