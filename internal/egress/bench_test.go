package egress_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"runtime"
	"testing"

	"github.com/webordinary/webordinary/internal/egress"
	"github.com/webordinary/webordinary/internal/sandbox"
)

// BenchmarkJobStart is what the job network adds to starting a job process: /bin/true in a
// jail on the host's network (as before), in an empty one (--build-offline), and behind the
// proxy (the namespace and the bridge); each opens and closes a session. Report p50 with
// -count, e.g.
//
//	go test ./internal/egress -run '^$' -bench JobStart -benchtime 50x -count 5
func BenchmarkJobStart(b *testing.B) {
	e := setup(b)
	for _, c := range []struct {
		name string
		spec func(*egress.Session) sandbox.Spec
	}{
		{"host-network", func(*egress.Session) sandbox.Spec { return sandbox.Spec{Writable: []string{e.dir}} }},
		{"no-network", func(*egress.Session) sandbox.Spec { return sandbox.Spec{Writable: []string{e.dir}, NoNetwork: true} }},
		{"egress", func(s *egress.Session) sandbox.Spec {
			return sandbox.Spec{Writable: []string{e.dir}, Egress: &sandbox.Egress{Socket: s.Socket, Port: e.proxy.Port()}}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				s, err := e.proxy.Open(egress.Policy{})
				if err != nil {
					b.Fatal(err)
				}
				cmd := exec.Command("/bin/true")
				cmd.Dir, cmd.Env = e.dir, []string{"PATH=/usr/bin:/bin"}
				p, err := e.sb.Jail(c.spec(s)).Start(cmd)
				if err != nil {
					b.Fatal(err)
				}
				if code, err := p.Wait(); err != nil || code != 0 {
					b.Fatalf("exit %d: %v", code, err)
				}
				s.Close()
			}
		})
	}
}

// BenchmarkRequest is what the proxy adds to one plain-HTTP request on the host (the bridge's
// relay inside the jail comes on top): direct to a loopback server, and through a session's
// socket with the policy check, name resolution and a fresh upstream connection per request.
//
//	go test ./internal/egress -run '^$' -bench Request -benchtime 2000x -count 5
func BenchmarkRequest(b *testing.B) {
	e := setup(b)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	b.Cleanup(srv.Close)
	target := srv.Listener.Addr().String()
	s, err := e.proxy.Open(egress.Policy{Allow: []string{target}, Private: []string{target}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	viaProxy := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", s.Socket)
		},
	}
	for _, c := range []struct {
		name string
		rt   http.RoundTripper
	}{{"direct", &http.Transport{}}, {"proxy", viaProxy}} {
		b.Run(c.name, func(b *testing.B) {
			client := &http.Client{Transport: c.rt}
			for b.Loop() {
				resp, err := client.Get(srv.URL)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// TestSessionMemory logs the heap an open, idle session holds (run with -v).
func TestSessionMemory(t *testing.T) {
	p, err := egress.New(egress.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const n = 100
	sessions := make([]*egress.Session, n)
	for i := range sessions {
		if sessions[i], err = p.Open(egress.Policy{Allow: []string{"registry.npmjs.org"}}); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	t.Logf("%d idle sessions: %d KiB heap, %d goroutines", n, (int64(after.HeapInuse)-int64(before.HeapInuse))/1024/n, runtime.NumGoroutine())
	for _, s := range sessions {
		s.Close()
	}
}
