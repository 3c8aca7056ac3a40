package natsjs

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/webordinary/webordinary/internal/dirlock"
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
	// Name is the server name; default "webordinary", or "webordinary-<hostname>-<cluster
	// port>" in a cluster, where every member's must differ.
	Name string
	// Cluster, when set, makes this server a member of a cluster of embedded servers (serve
	// processes on several machines), which replicates every stream and bucket.
	Cluster *ClusterConfig
}

// ClusterConfig joins an embedded server to other members. Members authenticate one another
// with the server's User and Password, so every member needs the same. Route traffic is not
// encrypted: keep the cluster addresses on a private network.
type ClusterConfig struct {
	// Name is the cluster's name, the same on every member.
	Name string
	// Listen is the host:port the other members connect to.
	Listen string
	// Routes are the other members' Listen addresses (host:port); this member's own may be
	// among them, so every member can be given the same list.
	Routes []string
}

func (c ServerConfig) validate() error {
	if c.Dir == "" {
		return errors.New("natsjs: server needs a directory (ServerConfig.Dir)")
	}
	if cl := c.Cluster; cl != nil {
		if !validClusterName(cl.Name) {
			return fmt.Errorf("natsjs: cluster name %q: use letters, digits, - and _", cl.Name)
		}
		if _, _, err := net.SplitHostPort(cl.Listen); err != nil {
			return fmt.Errorf("natsjs: cluster listen address %q: %w (use host:port, e.g. 10.0.0.1:6222)", cl.Listen, err)
		}
		for _, r := range cl.Routes {
			if _, _, err := net.SplitHostPort(r); err != nil {
				return fmt.Errorf("natsjs: cluster route %q: %w (use the other members' host:port)", r, err)
			}
		}
		if c.User == "" || c.Password == "" {
			return errors.New("natsjs: a cluster member needs a user and a password, the same on every member (members authenticate one another with them)")
		}
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

func validClusterName(n string) bool {
	if n == "" || len(n) > 64 {
		return false
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// StartServer starts an embedded NATS server with JetStream and waits until it is ready.
// One that fsyncs every write (NoSync false) gives the process more Ps than cores, unless the
// environment sets GOMAXPROCS (see syncProcs).
func StartServer(cfg ServerConfig) (*server.Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opts, err := serverOptions(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Cluster != nil {
		if err := checkNotStandalone(cfg.Dir); err != nil {
			return nil, err
		}
		useFastElections()
	}
	for _, addr := range []string{cfg.Listen, clusterListen(cfg)} {
		if addr != "" {
			if err := checkFree(addr); err != nil {
				return nil, err
			}
		}
	}
	release, err := lockDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		release()
		return nil, fmt.Errorf("natsjs: new server: %w", err)
	}
	if !cfg.NoSync {
		raiseProcsForSyncs()
	}
	go s.Start()
	go func() { s.WaitForShutdown(); release() }()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("natsjs: embedded server not ready after 10s")
	}
	return s, nil
}

// LockFile is the file in ServerConfig.Dir that an embedded server holds (flock) while it
// runs: JetStream's files have one writer, so a second server on the directory is refused.
const LockFile = "engine.lock"

// lockDir creates dir (0700) and locks it for this process until the server shuts down
// (release). A server of this process that is shutting down on dir releases it in a moment
// (after WaitForShutdown): a restart on the same directory waits for that, up to a bound.
func lockDir(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("natsjs: engine directory: %w", err)
	}
	lock, err := dirlock.Acquire(dir, LockFile)
	var held *dirlock.LockedError
	if errors.As(err, &held) && held.PID == os.Getpid() && ownLocks.wait(dir, 10*time.Second) {
		lock, err = dirlock.Acquire(dir, LockFile)
	}
	if errors.As(err, &held) {
		return nil, fmt.Errorf("natsjs: engine directory %s is in use (%w): another webordinary runs on it; stop that one or use another directory", dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("natsjs: engine directory: %w", err)
	}
	done := ownLocks.add(dir)
	return func() { _ = lock.Release(); ownLocks.remove(dir, done) }, nil
}

// ownLocks are the engine directories this process holds, each with a channel closed once
// released.
var ownLocks = dirLocks{m: map[string]chan struct{}{}}

type dirLocks struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

func (d *dirLocks) add(dir string) chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	ch := make(chan struct{})
	d.m[dir] = ch
	return ch
}

func (d *dirLocks) remove(dir string, ch chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m[dir] == ch {
		delete(d.m, dir)
	}
	close(ch)
}

// wait waits until this process no longer holds dir, at most d; it reports whether it let go.
func (d *dirLocks) wait(dir string, limit time.Duration) bool {
	d.mu.Lock()
	ch, ok := d.m[dir]
	d.mu.Unlock()
	if !ok {
		return true
	}
	select {
	case <-ch:
		return true
	case <-time.After(limit):
		return false
	}
}

func serverOptions(cfg ServerConfig) (*server.Options, error) {
	name := cfg.Name
	switch {
	case name != "":
	case cfg.Cluster != nil:
		// Unique per member even when every member listens on 0.0.0.0:6222 (NATS drops routes
		// between members of the same name), and stable while the machine keeps its name.
		host, _ := os.Hostname()
		_, port, _ := net.SplitHostPort(cfg.Cluster.Listen)
		name = "webordinary-" + cmp.Or(host, "host") + "-" + port
	default:
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
	if cl := cfg.Cluster; cl != nil {
		host, port, _ := net.SplitHostPort(cl.Listen)
		p, err := strconv.Atoi(port)
		if err != nil || p <= 0 {
			return nil, fmt.Errorf("natsjs: cluster listen port %q: want a fixed port the other members can be told", port)
		}
		// NoAdvertise: clients are not told the members' client addresses (among them a
		// loopback one, below, that on another machine could be anyone's).
		opts.Cluster = server.ClusterOpts{Name: cl.Name, Host: host, Port: p, Username: cfg.User, Password: cfg.Password, NoAdvertise: true}
		if opts.DontListen {
			// NATS starts routing only once a client port is open: a loopback one nobody is told.
			opts.DontListen, opts.Host, opts.Port = false, "127.0.0.1", server.RANDOM_PORT
		}
		for _, r := range cl.Routes {
			opts.Routes = append(opts.Routes, &neturl.URL{Scheme: "nats-route", Host: r, User: neturl.UserPassword(cfg.User, cfg.Password)})
		}
	}
	return opts, nil
}

// checkNotStandalone refuses to make a cluster member of a directory a single server wrote:
// a cluster does not know streams made before it and deletes them (nats-server issue 5467),
// so jobs, tables and blobs would be lost.
func checkNotStandalone(dir string) error {
	js := filepath.Join(dir, "jetstream")
	if _, err := os.Stat(filepath.Join(js, "$SYS", "_js_", "_meta_")); err == nil {
		return nil // a cluster member's directory
	}
	accounts, err := os.ReadDir(js)
	if err != nil {
		return nil // new
	}
	for _, acc := range accounts {
		if !acc.IsDir() || acc.Name() == "$SYS" {
			continue
		}
		if streams, err := os.ReadDir(filepath.Join(js, acc.Name(), "streams")); err == nil && len(streams) > 0 {
			return fmt.Errorf("natsjs: %s holds a single server's data (%d streams); as a cluster member it would be lost: "+
				"give the member a new directory, and move what you need with `nats stream backup` and `nats stream restore` "+
				"(or keep this directory single: drop cluster= from the URL)", dir, len(streams))
		}
	}
	return nil
}

func clusterListen(cfg ServerConfig) string {
	if cfg.Cluster == nil {
		return ""
	}
	return cfg.Cluster.Listen
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
