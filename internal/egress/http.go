package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"time"
)

// tunnel serves CONNECT host:port: a raw TCP tunnel to an allowed destination.
func (s *Session) tunnel(w http.ResponseWriter, r *http.Request) {
	up, err := s.dial(r.Context(), r.Host)
	if err != nil {
		refuse(w, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "egress: cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, rw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if !s.track(down, up) {
		return
	}
	defer s.untrack(down, up)
	defer down.Close() // whatever happens below (a client that stopped reading fails the write)
	defer up.Close()
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	pipe(down, rw.Reader, up)
}

// pipe copies both ways until both directions are done, then closes both.
func pipe(down net.Conn, buffered io.Reader, up net.Conn) {
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, buffered) // the client's bytes, those already read first
		closeWrite(up)
		close(done)
	}()
	_, _ = io.Copy(down, up)
	closeWrite(down)
	<-done
	down.Close()
	up.Close()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		c.Close()
	}
}

// track records a tunnel's connections so that Close cuts them; false (and both closed) when
// the session is already closed.
func (s *Session) track(cs ...net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	if s.conns == nil {
		s.conns = map[net.Conn]bool{}
	}
	for _, c := range cs {
		s.conns[c] = true
	}
	return true
}

func (s *Session) untrack(cs ...net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		delete(s.conns, c)
	}
}

// cutTunnels closes every open tunnel (at Close).
func (s *Session) cutTunnels() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
	clear(s.conns)
}

// forward serves a plain-HTTP request to an allowed destination (absolute-URI form).
func (s *Session) forward(w http.ResponseWriter, r *http.Request) {
	if r.URL.Scheme != "http" {
		http.Error(w, "egress: only http:// is forwarded; use CONNECT for https", http.StatusBadRequest)
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = pr.In.URL
			pr.Out.Host = pr.In.URL.Host
			pr.Out.Header.Del("Proxy-Authorization")
		},
		Transport:    s.transport(),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) { refuse(w, err) },
	}
	rp.ServeHTTP(w, r)
}

// transport dials through the session's policy.
func (s *Session) transport() *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return s.dial(ctx, addr)
		},
		DisableKeepAlives:     true,
		ResponseHeaderTimeout: 5 * time.Minute,
	}
}

// refuse answers a request the policy or the destination turned away.
func refuse(w http.ResponseWriter, err error) {
	code := http.StatusBadGateway
	if errors.Is(err, errDenied) {
		code = http.StatusForbidden
	}
	http.Error(w, err.Error(), code)
}
