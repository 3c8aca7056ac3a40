package awstest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// startTimeout bounds an emulator's start (DynamoDB Local's JVM can take half a minute on a
// loaded machine).
const startTimeout = 90 * time.Second

// Emulator is one running emulator process.
type Emulator struct {
	// Name says which emulator it is ("fauxqs", "dynalite", "dynamodb-local", "ses").
	Name string
	// URL is its endpoint, http://127.0.0.1:PORT.
	URL string

	cmd      *exec.Cmd
	out      *tail
	stop     []func()
	exited   chan struct{}
	stopping atomic.Bool // Stop was called: its exit is expected
}

// Stop kills the process by its pid and waits for it. Idempotent.
func (e *Emulator) Stop() {
	if e == nil || e.cmd == nil {
		return
	}
	for _, f := range e.stop {
		f()
	}
	e.stop = nil
	e.stopping.Store(true)
	_ = e.cmd.Process.Kill()
	<-e.exited
}

// Output returns the last lines the process wrote, for failure messages.
func (e *Emulator) Output() string { return e.out.String() }

// Dir returns where .ci/aws-emulators installs the emulators.
func Dir() string {
	if d := os.Getenv("WO_AWS_EMULATORS"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "webordinary", "aws-emulators")
}

// errMissing marks an emulator that is not installed.
var errMissing = errors.New("not installed")

// installed checks that the node package pkg is in Dir.
func installed(pkg string) error {
	if _, err := exec.LookPath("node"); err != nil {
		return fmt.Errorf("node: %w (install Node.js 20)", errMissing)
	}
	p := filepath.Join(Dir(), "node_modules", pkg, "package.json")
	if _, err := os.Stat(p); err != nil {
		return fmt.Errorf("%s: %w in %s (run .ci/aws-emulators)", pkg, errMissing, Dir())
	}
	return nil
}

// listening is what the start scripts print once their server listens.
var listening = regexp.MustCompile(`LISTENING (\d+)`)

// startNode runs a node script (CommonJS, or ESM when esm) in Dir that prints "LISTENING PORT"
// once it serves, and returns the emulator at that port.
func startNode(ctx context.Context, name, script string, esm bool) (*Emulator, error) {
	args := []string{"-e", script}
	if esm {
		args = []string{"--input-type=module", "-e", script}
	}
	cmd := exec.Command("node", args...)
	cmd.Dir = Dir()
	e, err := launch(name, cmd)
	if err != nil {
		return nil, err
	}
	port, err := e.awaitLine(ctx, listening)
	if err != nil {
		e.Stop()
		return nil, err
	}
	e.URL = "http://127.0.0.1:" + port
	return e, nil
}

// launch starts cmd with its output captured; the child dies with this process.
func launch(name string, cmd *exec.Cmd) (*Emulator, error) {
	pr, pw := io.Pipe()
	e := &Emulator{Name: name, cmd: cmd, out: newTail(pr), exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		err := cmd.Wait()
		_ = pw.Close()
		if !e.stopping.Load() { // tests that use it fail next: say why
			fmt.Fprintf(os.Stderr, "awstest: %s (pid %d) exited on its own: %v; its last output:\n%s\n", name, cmd.Process.Pid, err, e.out.String())
		}
		close(e.exited)
	}()
	return e, nil
}

// awaitLine waits until the output has a line matching re and returns its first group.
func (e *Emulator) awaitLine(ctx context.Context, re *regexp.Regexp) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		if m := re.FindStringSubmatch(e.out.String()); m != nil {
			return m[1], nil
		}
		select {
		case <-e.exited:
			return "", fmt.Errorf("%s exited before it listened:\n%s", e.Name, e.Output())
		case <-ctx.Done():
			return "", fmt.Errorf("%s did not listen within %v:\n%s", e.Name, startTimeout, e.Output())
		case <-e.out.changed():
		}
	}
}

// tail keeps the last 64 KiB a process wrote.
type tail struct {
	mu     sync.Mutex
	buf    []byte
	notify chan struct{}
}

func newTail(r io.Reader) *tail {
	t := &tail{notify: make(chan struct{})}
	go t.read(r)
	return t
}

func (t *tail) read(r io.Reader) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		t.mu.Lock()
		t.buf = append(t.buf, s.Bytes()...)
		t.buf = append(t.buf, '\n')
		if len(t.buf) > 64*1024 {
			t.buf = t.buf[len(t.buf)-64*1024:]
		}
		close(t.notify)
		t.notify = make(chan struct{})
		t.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, r)
}

func (t *tail) changed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.notify
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
