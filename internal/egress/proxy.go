package egress

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// DefaultPort is where a job reaches the proxy inside its jail (127.0.0.1:DefaultPort). Every
// job has a network namespace of its own, so one fixed port serves them all.
const DefaultPort = 3128

// Config configures the proxy.
type Config struct {
	// Dir holds the jobs' sockets; default a fresh directory under /tmp, removed by Close. It
	// must be reachable by the job's user (bwrap binds the socket from there as that user)
	// and short (a UNIX socket path has 107 bytes).
	Dir string
	// Port is the proxy's port inside jails; default DefaultPort.
	Port int
	// Log receives a line per refused connection; default slog.Default().
	Log *slog.Logger
	// DialTimeout bounds connecting to a destination; default 30s.
	DialTimeout time.Duration
}

// Proxy hands out Sessions, one per job. It is safe for concurrent use.
type Proxy struct {
	cfg Config
	dir string // made by New (removed by Close) when Config.Dir was empty
}

// New prepares the proxy's socket directory.
func New(cfg Config) (*Proxy, error) {
	p := &Proxy{cfg: cfg}
	if p.cfg.Port == 0 {
		p.cfg.Port = DefaultPort
	}
	if p.cfg.Log == nil {
		p.cfg.Log = slog.Default()
	}
	if p.cfg.DialTimeout == 0 {
		p.cfg.DialTimeout = 30 * time.Second
	}
	if p.cfg.Dir == "" {
		d, err := socketDir()
		if err != nil {
			return nil, fmt.Errorf("egress: %w", err)
		}
		p.cfg.Dir, p.dir = d, d
	}
	if len(p.cfg.Dir)+len("/0123456789abcdef.sock") > maxSocketPath {
		return nil, fmt.Errorf("egress: socket directory %s is too long for a UNIX socket path (%d bytes at most): choose a shorter one", p.cfg.Dir, maxSocketPath)
	}
	if err := os.MkdirAll(p.cfg.Dir, 0o711); err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	// The job's user must reach its socket; nobody may list or plant files here.
	if err := os.Chmod(p.cfg.Dir, 0o711); err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	return p, nil
}

// maxSocketPath is the longest UNIX socket path Linux takes (sun_path less its NUL).
const maxSocketPath = 107

// socketDir makes the proxy's directory under /tmp — not $TMPDIR, which may be long (a socket
// path has 107 bytes) or closed to the job's user, who must reach the socket.
func socketDir() (string, error) {
	return os.MkdirTemp("/tmp", "wo-egress-")
}

// Port is where jobs reach the proxy inside their jails.
func (p *Proxy) Port() int { return p.cfg.Port }

// Close removes the socket directory New made.
func (p *Proxy) Close() error {
	if p == nil || p.dir == "" {
		return nil
	}
	return os.RemoveAll(p.dir)
}

// Session is one job's way out: its socket, its token, its policy and what it was refused.
type Session struct {
	// Socket is the host path of the job's socket (bind it into the jail: sandbox.Egress).
	Socket string
	// Token is the job's stand-in for the model credentials: the proxy takes it instead of
	// the real key on the model routes, and only while the session is open.
	Token string

	p      *Proxy
	policy Policy
	ln     net.Listener
	srv    *http.Server
	done   chan struct{}

	mu     sync.Mutex
	denied map[denialKey]int
	conns  map[net.Conn]bool // open tunnels' connections
	usage  Usage
	closed bool
}

// Open starts a session with policy: a fresh socket and token.
func (p *Proxy) Open(policy Policy) (*Session, error) {
	tok, err := token()
	if err != nil {
		return nil, fmt.Errorf("egress: token: %w", err)
	}
	// A name of its own, not part of the token: a job sees its socket's host path in
	// /proc/self/mountinfo.
	name := make([]byte, 8)
	if _, err := rand.Read(name); err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	sock := filepath.Join(p.cfg.Dir, hex.EncodeToString(name)+".sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("egress: listen: %w", err)
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("egress: %w", err)
	}
	s := &Session{Socket: sock, Token: tok, p: p, policy: policy.normalized(), ln: ln,
		done: make(chan struct{}), denied: map[denialKey]int{}}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: time.Minute,
		ErrorLog: slog.NewLogLogger(p.cfg.Log.Handler(), slog.LevelDebug)}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(limit(ln, maxConns))
	}()
	return s, nil
}

// Close stops the session: its socket goes, open tunnels are cut and its token no longer
// works. Safe to call more than once.
func (s *Session) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	already := s.closed
	s.closed = true
	s.mu.Unlock()
	if already {
		return nil
	}
	err := s.srv.Close() // the listener (the socket file with it) and requests in flight
	s.cutTunnels()       // hijacked: the server no longer knows them
	<-s.done
	_ = os.Remove(s.Socket)
	return err
}

func token() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "wo-job-" + hex.EncodeToString(b), nil
}

// ServeHTTP routes a job's request: CONNECT tunnels, absolute-URI forwards, model routes.
func (s *Session) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodConnect:
		s.tunnel(w, r)
	case r.URL.IsAbs() && s.itself(r.URL.Host):
		// A client that sends even the proxy's own address through the proxy.
		r.URL = &url.URL{Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
		s.model(w, r)
	case r.URL.IsAbs():
		s.forward(w, r)
	default:
		s.model(w, r)
	}
}

// itself reports whether hostport is the proxy's address inside the jail.
func (s *Session) itself(hostport string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil || port != strconv.Itoa(s.p.cfg.Port) {
		return false
	}
	return host == "127.0.0.1" || host == "localhost" || host == "::1"
}

// errDenied is a destination the session's policy refuses.
var errDenied = errors.New("egress: destination not allowed")

// dial connects to hostport if the policy allows it, to the address it checked.
func (s *Session) dial(ctx context.Context, hostport string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		s.deny(hostport, "bad address")
		return nil, fmt.Errorf("%w: %s: %v", errDenied, hostport, err)
	}
	if !s.policy.allows(host, port) {
		s.deny(hostport, "host not allowed")
		return nil, fmt.Errorf("%w: %s is not on the project's allowlist", errDenied, hostport)
	}
	addrs, err := s.resolve(ctx, host)
	if err != nil {
		s.deny(hostport, "does not resolve")
		return nil, fmt.Errorf("egress: resolve %s: %w", host, err)
	}
	private := s.policy.privateOK(host, port)
	own := hostAddrs()
	d := net.Dialer{Timeout: s.p.cfg.DialTimeout}
	var last error = fmt.Errorf("%w: %s resolves only to non-public addresses", errDenied, hostport)
	for _, a := range addrs {
		if (!public(a) || own[a]) && !private {
			continue // the host's own public address reaches its services from inside its firewall
		}
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		last = err
	}
	if errors.Is(last, errDenied) {
		s.deny(hostport, "non-public address")
	}
	return nil, last
}

// Env is the job's proxy settings: the HTTP(S)_PROXY variables in both cases, npm's, Node's
// switch to honour them in fetch, and NO_PROXY for the proxy's own address (the model routes
// are asked of it directly).
func (s *Session) Env() []string {
	u := "http://127.0.0.1:" + strconv.Itoa(s.p.cfg.Port)
	return []string{"HTTP_PROXY=" + u, "HTTPS_PROXY=" + u, "http_proxy=" + u, "https_proxy=" + u,
		"ALL_PROXY=" + u, "all_proxy=" + u,
		"NO_PROXY=127.0.0.1,localhost,::1", "no_proxy=127.0.0.1,localhost,::1",
		"npm_config_proxy=" + u, "npm_config_https_proxy=" + u, "NODE_USE_ENV_PROXY=1"}
}

// maxConns bounds a session's open connections from its job (each holds a descriptor of the
// platform's, and a tunnel one more): a job cannot exhaust serve's.
const maxConns = 256

// limitListener accepts at most n connections at a time; Accept waits for one to close, or for
// the listener to close (so that a session whose slots a job holds still closes).
type limitListener struct {
	net.Listener
	slots  chan struct{}
	closed chan struct{}
	once   sync.Once
}

func limit(ln net.Listener, n int) net.Listener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, n), closed: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.slots }}, nil
}

// Close closes the listener and ends a wait in Accept.
func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// hostAddrs are this host's own interface addresses (looked up at each dial: they change).
func hostAddrs() map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return out
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out[p.Addr().Unmap()] = true
		}
	}
	return out
}
