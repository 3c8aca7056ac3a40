package sandbox

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// Egress gives a job a network of its own whose only way out is the platform's egress proxy:
// the job runs in an empty network namespace (loopback only) where a bridge, started inside the
// jail before the job's program, listens on 127.0.0.1:Port and relays each connection to the
// proxy's UNIX socket, bound into the jail. Nothing on the host's network, its loopback
// included, is reachable otherwise.
type Egress struct {
	// Socket is the host path of the proxy's UNIX socket for this job.
	Socket string
	// Port is where the bridge listens inside the jail (the job's HTTP(S)_PROXY port).
	Port int
}

// jailSocket is where the proxy's socket appears inside the jail.
const jailSocket = "/run/webordinary-egress.sock"

// bridgeArg marks webordinary's own binary run as the egress bridge (see init).
const bridgeArg = "__webordinary-egress-bridge"

// egressArgs are the bwrap arguments of a job behind the egress proxy.
func (j *Jail) egressArgs() []string {
	e := j.egress()
	if e == nil {
		return nil
	}
	return []string{"--unshare-net", "--bind", e.Socket, jailSocket}
}

// egress is the job's egress, nil when it has none or no network at all.
func (j *Jail) egress() *Egress {
	if j.spec.NoNetwork {
		return nil
	}
	return j.spec.Egress
}

// egressProgram is the program bwrap runs: the bridge, which then runs prog with args, when the
// job is behind the proxy; prog itself otherwise. Where webordinary's binary cannot be shown in
// the jail (selfPath is empty), there is no bridge: the job keeps its empty network namespace
// and has no network at all, rather than a bridge path that does not exist.
func (j *Jail) egressProgram(prog string, args []string) []string {
	e := j.egress()
	self := j.s.selfPath()
	if e == nil || self == "" {
		return append([]string{prog}, args...)
	}
	return append([]string{self, bridgeArg, jailSocket, strconv.Itoa(e.Port), prog}, args...)
}

// init runs the egress bridge when the process was started as one (and never returns then):
// every binary that can start a job behind the proxy links this package and so can be its
// bridge, test binaries included, without a call in main that a binary could forget (a
// forgotten call would run the binary's own main inside the jail).
func init() {
	if len(os.Args) < 5 || os.Args[1] != bridgeArg {
		return
	}
	os.Exit(bridge(os.Args[2], os.Args[3], os.Args[4:]))
}

// bridge listens on 127.0.0.1:port, relays connections to socket and runs argv as its child,
// returning its exit status. An interrupt (SIGINT to the job's process group) reaches the child
// directly; the bridge outlives it so the child can still talk to the network while it winds
// down. A kill takes both (the reaper sweeps the whole jail).
func bridge(socket, port string, argv []string) int {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGHUP, syscall.SIGTERM)
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		fmt.Fprintf(os.Stderr, "webordinary egress bridge: %v\n", err)
		return 126
	}
	go relayAll(ln, socket)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exitStatus(exit)
	}
	fmt.Fprintf(os.Stderr, "webordinary egress bridge: %v\n", err)
	return 127
}

// exitStatus is the child's exit code, or 128+signal when a signal ended it (as a shell says).
func exitStatus(exit *exec.ExitError) int {
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return exit.ExitCode()
}

func relayAll(ln net.Listener, socket string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go relay(c, socket)
	}
}

// relay copies between a job's TCP connection and a fresh connection to the proxy's socket.
func relay(c net.Conn, socket string) {
	defer c.Close()
	u, err := net.Dial("unix", socket)
	if err != nil {
		return
	}
	defer u.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(u, c)
		_ = u.(*net.UnixConn).CloseWrite()
		close(done)
	}()
	_, _ = io.Copy(c, u)
	_ = c.(*net.TCPConn).CloseWrite()
	<-done
}

// CheckNetwork runs /bin/true in a jail with a network namespace of its own, as a job behind
// the egress proxy runs; the error says why jobs cannot have one.
func (s *Sandbox) CheckNetwork() error {
	if !s.Active() {
		return errors.New("jobs run unsandboxed")
	}
	cmd := exec.Command("/bin/true")
	if err := s.Jail(Spec{NoNetwork: true}).Wrap(cmd); err != nil {
		return err
	}
	if out, err := outputWithoutCaps(cmd); err != nil {
		return fmt.Errorf("bwrap cannot give a job a network namespace of its own: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
