package sandbox_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/capability"
	"github.com/webordinary/webordinary/internal/reaper"
	"github.com/webordinary/webordinary/internal/sandbox"
)

func TestMain(m *testing.M) {
	reaper.Main()
	os.Exit(m.Run())
}

// required returns a sandbox in mode required, or skips (saying why) where bwrap cannot run.
func required(t testing.TB, roots ...string) *sandbox.Sandbox {
	t.Helper()
	// Skip only where bwrap itself cannot make a user namespace; anything else is our bug.
	capability.Need(t, capability.Bubblewrap)
	s, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeRequired, Roots: roots})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tenant is a job's directories: a workspace with a .git, under a root the job can reach.
type tenant struct{ root, ws string }

func newTenant(t testing.TB, s *sandbox.Sandbox) tenant {
	t.Helper()
	root := t.TempDir()
	// t.TempDir's directories are 0700; the job's user must be able to enter them.
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ws := filepath.Join(root, "ws")
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Own(ws); err != nil {
		t.Fatal(err)
	}
	return tenant{root: root, ws: ws}
}

func (tn tenant) spec() sandbox.Spec {
	return sandbox.Spec{Writable: []string{tn.ws}, ReadOnly: []string{filepath.Join(tn.ws, ".git")}}
}

// runIn runs script with sh -c in the jail, under the reaper as the platform does, and returns
// its combined output and exit code.
func runIn(t *testing.T, j *sandbox.Jail, dir, script string) (string, int) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir, cmd.Env = dir, []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	p, err := j.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	code, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

func TestJobCannotReachThePlatform(t *testing.T) {
	t.Parallel()
	s := required(t)
	tn := newTenant(t, s)
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "credentials")
	if err := os.WriteFile(secret, []byte("hunter2"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := newTenant(t, s)
	if err := os.WriteFile(filepath.Join(other.ws, "page.html"), []byte("other tenant"), 0o644); err != nil {
		t.Fatal(err)
	}
	self := os.Getpid()
	attacks := map[string]string{
		"read the platform's environment":  fmt.Sprintf("cat /proc/%d/environ", self),
		"read the platform's command line": fmt.Sprintf("cat /proc/%d/cmdline", self),
		"signal the platform":              fmt.Sprintf("kill -0 %d", self),
		"read a platform file":             "cat " + secret,
		"read another tenant's workspace":  "cat " + filepath.Join(other.ws, "page.html"),
		"write into another tenant":        "echo x > " + filepath.Join(other.ws, "evil"),
		"write git hooks":                  "mkdir -p .git/hooks && echo 'id' > .git/hooks/post-commit",
		"rewrite git config":               "echo '[core] fsmonitor = evil' >> .git/config",
		"see the host's processes":         "test $(ls /proc | grep -c '^[0-9]') -gt 5",
		"read root's home":                 "ls /root",
		"read /etc/shadow":                 "cat /etc/shadow",
	}
	j := s.Jail(tn.spec())
	for name, script := range attacks {
		if out, code := runIn(t, j, tn.ws, script); code == 0 {
			t.Errorf("%s: succeeded inside the sandbox (%q): %s", name, script, out)
		}
	}
	if _, err := os.Stat(filepath.Join(other.ws, "evil")); err == nil {
		t.Error("a job wrote into another tenant's workspace")
	}
}

func TestJobWorksInItsWorkspace(t *testing.T) {
	t.Parallel()
	s := required(t)
	tn := newTenant(t, s)
	out, code := runIn(t, s.Jail(tn.spec()), tn.ws, "echo hello > index.html && cat .git/config && id -u && echo ok")
	if code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("exit %d: %s", code, out)
	}
	fi, err := os.Stat(filepath.Join(tn.ws, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != sandbox.DefaultUID {
			t.Errorf("file written by the job is owned by uid %d, want %d", st.Uid, sandbox.DefaultUID)
		}
		if !strings.Contains(out, fmt.Sprint(sandbox.DefaultUID)) {
			t.Errorf("job does not run as uid %d: %s", sandbox.DefaultUID, out)
		}
	}
}

func TestPrivateTmp(t *testing.T) {
	t.Parallel()
	s := required(t)
	a, b := newTenant(t, s), newTenant(t, s)
	marker := fmt.Sprintf("wo-sandbox-test-%d", time.Now().UnixNano())
	if out, code := runIn(t, s.Jail(a.spec()), a.ws, "echo left > /tmp/"+marker); code != 0 {
		t.Fatalf("write /tmp: %s", out)
	}
	if out, code := runIn(t, s.Jail(b.spec()), b.ws, "cat /tmp/"+marker); code == 0 {
		t.Errorf("a second job read the first job's /tmp file: %s", out)
	}
	if _, err := os.Stat(filepath.Join(os.TempDir(), marker)); err == nil {
		t.Error("the job's /tmp file appeared in the host's /tmp")
	}
}

func TestNoNetwork(t *testing.T) {
	t.Parallel()
	s := required(t)
	tn := newTenant(t, s)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	// bash's /dev/tcp is not in dash; use a tiny connect through /proc-free means: nc may be
	// missing, so probe with the shell's own redirection under bash when present.
	probe := fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d", port)
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	run := func(spec sandbox.Spec) int {
		cmd := exec.Command("/bin/bash", "-c", probe)
		cmd.Dir, cmd.Env = tn.ws, []string{"PATH=/usr/bin:/bin"}
		p, err := s.Jail(spec).Start(cmd)
		if err != nil {
			t.Fatal(err)
		}
		code, _ := p.Wait()
		return code
	}
	if code := run(tn.spec()); code != 0 {
		t.Errorf("with network: connecting to the host's loopback failed (exit %d)", code)
	}
	off := tn.spec()
	off.NoNetwork = true
	if code := run(off); code == 0 {
		t.Error("with NoNetwork: the job reached a host loopback port")
	}
}

func TestInterruptReachesTheJob(t *testing.T) {
	t.Parallel()
	s := required(t)
	tn := newTenant(t, s)
	cmd := exec.Command("/bin/sh", "-c", "trap 'echo got-int; exit 7' INT; echo ready; while :; do sleep 0.05; done")
	cmd.Dir, cmd.Env = tn.ws, []string{"PATH=/usr/bin:/bin"}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	p, err := s.Jail(tn.spec()).Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "ready") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.Interrupt(); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() { code, _ := p.Wait(); done <- code }()
	select {
	case code := <-done:
		if !strings.Contains(out.String(), "got-int") {
			t.Errorf("the job did not see SIGINT (exit %d): %s", code, out.String())
		}
	case <-time.After(10 * time.Second):
		_ = p.Kill()
		t.Fatal("SIGINT did not reach the sandboxed job")
	}
}

func TestModes(t *testing.T) {
	t.Parallel()
	_, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeRequired, Bwrap: "/nonexistent/bwrap"})
	if !errors.Is(err, sandbox.ErrUnavailable) {
		t.Errorf("required without bwrap: %v, want ErrUnavailable", err)
	}
	auto, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeAuto, Bwrap: "/nonexistent/bwrap"})
	if err != nil {
		t.Fatal(err)
	}
	if st := auto.Status(); st.Active || !strings.Contains(st.Warning, "UNSANDBOXED") {
		t.Errorf("auto without bwrap: %+v, want inactive with a warning", st)
	}
	if auto.Jail(sandbox.Spec{}) != nil {
		t.Error("an inactive sandbox returned a jail")
	}
	off, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeOff})
	if err != nil || off.Active() || off.Status().Warning == "" {
		t.Errorf("off: %v %+v", err, off.Status())
	}
	if _, err := sandbox.New(sandbox.Config{Mode: "maybe"}); err == nil {
		t.Error("an unknown mode was accepted")
	}
}

func TestUnreachableRootIsASetupError(t *testing.T) {
	t.Parallel()
	capability.Need(t, capability.Root)
	required(t)
	closed := t.TempDir()
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeAuto, Roots: []string{filepath.Join(closed, "data", "workspaces")}})
	if err == nil || !strings.Contains(err.Error(), "cannot enter "+closed) {
		t.Errorf("a workspace root the job user cannot enter: %v, want an error naming %s", err, closed)
	}
}

type syncBuffer struct {
	mu  chan struct{}
	buf bytes.Buffer
}

func (b *syncBuffer) lock() {
	if b.mu == nil {
		b.mu = make(chan struct{}, 1)
	}
	b.mu <- struct{}{}
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.lock()
	defer func() { <-b.mu }()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.lock()
	defer func() { <-b.mu }()
	return b.buf.String()
}

// TestJobsFilesUnderWhatEveryJobSeesAreRefused: a data directory under a path every jail binds
// read-only (here sandbox.read_only names its parent; /opt or a PATH directory would do the
// same) would let each job read every other site's workspace. The sandbox refuses it at once
// and says what to do.
func TestJobsFilesUnderWhatEveryJobSeesAreRefused(t *testing.T) {
	t.Parallel()
	capability.Need(t, capability.Bubblewrap)
	shared := t.TempDir()
	for _, d := range []string{filepath.Dir(shared), shared} { // t.TempDir's are 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ws := filepath.Join(shared, "data", "workspaces")
	_, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeRequired, ReadOnly: []string{shared}, Roots: []string{ws}})
	if err == nil || !strings.Contains(err.Error(), "every job sees read-only") || !strings.Contains(err.Error(), "put the data directory elsewhere") {
		t.Fatalf("jobs' files under a path every job sees: %v; want a refusal that says what to do", err)
	}
	if _, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeRequired, ReadOnly: []string{filepath.Join(shared, "tools")}, Roots: []string{ws}}); err != nil {
		t.Fatalf("a read-only path beside the data directory: %v", err)
	}
}
