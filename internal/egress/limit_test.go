package egress

import (
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// TestAFullListenerStillCloses: with every slot held (a job keeping as many connections as a
// session serves), closing the listener must end the wait in Accept, or the session's Serve
// never returns and the worker waits for it forever.
func TestAFullListenerStillCloses(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	l := limit(ln, 2)
	for range 2 {
		go func() {
			if c, err := net.Dial("unix", ln.Addr().String()); err == nil {
				t.Cleanup(func() { c.Close() })
			}
		}()
		if _, err := l.Accept(); err != nil {
			t.Fatal(err)
		}
	}
	accepted := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		accepted <- err
	}()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-accepted:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Accept still waits for a slot after the listener closed")
	}
}
