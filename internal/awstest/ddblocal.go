package awstest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ddbLocalPort is DynamoDB Local's port inside its own network namespace: nothing else is
// there, so a fixed port cannot collide.
const ddbLocalPort = "8000"

// StartDynamoDBLocal starts AWS's DynamoDB Local in a private network namespace and bridges a
// free loopback port of this namespace into it. Needs java, root and the jar.
func StartDynamoDBLocal(ctx context.Context) (*Emulator, error) {
	if err := ddbLocalPossible(); err != nil {
		return nil, err
	}
	jar, err := ddbLocalJar()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("unshare", "-n", "sh", "-c",
		"ip link set lo up && exec java -Djava.library.path=./DynamoDBLocal_lib -jar DynamoDBLocal.jar -inMemory -disableTelemetry -port "+ddbLocalPort)
	cmd.Dir = filepath.Dir(jar)
	e, err := launch("dynamodb-local", cmd)
	if err != nil {
		return nil, err
	}
	if err := e.bridge(); err != nil {
		e.Stop()
		return nil, err
	}
	if err := e.awaitHTTP(ctx); err != nil {
		e.Stop()
		return nil, err
	}
	return e, nil
}

// bridge listens on a free loopback port and forwards each connection into the process's
// network namespace.
func (e *Emulator) bridge() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("dynamodb-local bridge: %w", err)
	}
	ns := fmt.Sprintf("/proc/%d/ns/net", e.cmd.Process.Pid)
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { forward(c, ns) })
		}
	}()
	e.URL = "http://" + ln.Addr().String()
	e.stop = append(e.stop, func() { _ = ln.Close(); wg.Wait() })
	return nil
}

// forward copies between c and a connection to DynamoDB Local inside namespace ns.
func forward(c net.Conn, ns string) {
	defer c.Close()
	in, err := dialInNamespace(ns, "127.0.0.1:"+ddbLocalPort)
	if err != nil {
		return
	}
	defer in.Close()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(in, c)
	go cp(c, in)
	<-done
	<-done
}

// dialInNamespace dials addr from network namespace ns: a locked thread enters the namespace,
// creates the socket there and goes back to its own namespace before it is unlocked. If it
// cannot go back it stays locked, so it ends with its goroutine and no other goroutine ever
// runs in that namespace. (Threads must not end otherwise: a child started with Pdeathsig is
// killed when the thread that started it ends.)
func dialInNamespace(ns, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		c, back, err := dialFromThread(ns, addr)
		if back {
			runtime.UnlockOSThread()
		}
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// dialFromThread runs on a locked thread; back reports whether the thread is in its own
// namespace again.
func dialFromThread(ns, addr string) (c net.Conn, back bool, err error) {
	own, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		return nil, true, err
	}
	defer own.Close()
	target, err := os.Open(ns)
	if err != nil {
		return nil, true, err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("setns: %w", err)
	}
	c, err = net.DialTimeout("tcp", addr, 5*time.Second)
	back = unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) == nil
	return c, back, err
}

// awaitHTTP waits until DynamoDB Local answers an HTTP request through the bridge (the bridge
// accepts long before the JVM serves).
func (e *Emulator) awaitHTTP(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		resp, err := client.Post(e.URL, "application/x-amz-json-1.0", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-e.exited:
			return fmt.Errorf("dynamodb-local exited before it served:\n%s", e.Output())
		case <-ctx.Done():
			return fmt.Errorf("dynamodb-local did not serve within %v:\n%s", startTimeout, e.Output())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
