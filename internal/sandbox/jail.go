package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/webordinary/webordinary/internal/reaper"
)

// Spec is what one job process may see besides the read-only toolchain.
type Spec struct {
	// Writable are host directories bound read-write at the same path (the tenant's
	// workspace, agent state and home). They must exist.
	Writable []string
	// ReadOnly are host paths bound read-only at the same path, after Writable, so a path
	// inside a writable directory (the workspace's .git) can be made read-only.
	ReadOnly []string
	// NoNetwork gives the process an empty network namespace (loopback only, nothing listening).
	NoNetwork bool
	// Limits are the job's own resource limits (the project's); what they leave unset comes
	// from Config.Limits.
	Limits Limits
	// Egress, when set (and NoNetwork is not), gives the process a network namespace whose
	// only way out is the platform's egress proxy (see Egress).
	Egress *Egress
}

// Jail applies a Spec to commands. A nil *Jail, or one from an inactive Sandbox, leaves
// commands as they are (unsandboxed).
type Jail struct {
	s    *Sandbox
	spec Spec

	mu   sync.Mutex
	last *watch // the group of the last process Start started, when jobs get groups
}

// Jail returns the jail for spec.
func (s *Sandbox) Jail(spec Spec) *Jail {
	if !s.Active() {
		return nil
	}
	return &Jail{s: s, spec: spec}
}

// Active reports whether commands wrapped by j run sandboxed.
func (j *Jail) Active() bool { return j != nil }

// Wrap rewrites cmd, not yet started, to run inside the sandbox: cmd.Path becomes bwrap, the
// original program and arguments follow "--", cmd.Dir becomes the sandbox's working directory
// (it must lie inside a Writable or ReadOnly path, or the toolchain), and, when the platform
// runs as root, cmd.SysProcAttr.Credential is the job's uid and gid (reaper.Start honours it).
// cmd.Env is passed through unchanged: it must already be the job's allowlist. Wrap alone
// gives the process no control group (Start does). A nil j leaves cmd unchanged.
func (j *Jail) Wrap(cmd *exec.Cmd) error {
	return j.wrap(cmd, false)
}

// wrap is Wrap; grouped, the process will run in a control group with the job's memory and
// process limits, which the rlimit shim then leaves out.
func (j *Jail) wrap(cmd *exec.Cmd, grouped bool) error {
	if j == nil {
		return nil
	}
	prog, err := programPath(cmd)
	if err != nil {
		return err
	}
	args := append(j.tmpfsArgs(), j.s.base...)
	args = append(args, j.devArgs()...)
	args = append(args, j.s.programBinds(prog)...)
	args = append(args, j.s.selfBinds()...)
	args = append(args, j.binds()...)
	if j.spec.NoNetwork {
		args = append(args, "--unshare-net")
	}
	args = append(args, j.egressArgs()...)
	if cmd.Dir != "" {
		args = append(args, "--chdir", cmd.Dir)
	}
	// Inside the jail: the rlimit shim sets the limits and execs the egress bridge (when the
	// job has a network of its own), which runs the program as its child.
	inner := j.egressProgram(prog, cmd.Args[min(1, len(cmd.Args)):])
	var argv []string
	argv, cmd.Env = j.shimArgs(inner[0], cmd.Env, grouped)
	args = append(append(args, "--"), argv...)
	args = append(args, inner[1:]...)
	cmd.Path, cmd.Args, cmd.Dir = j.s.bwrap, append([]string{j.s.bwrap}, args...), "/"
	if cred := j.s.credential(); cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	return nil
}

// Start wraps cmd (see Wrap) and starts it under the reaper's supervisor, so that an
// interrupt reaches the sandboxed command and a kill takes the whole sandbox. Where the
// platform can make control groups, the supervisor, bwrap and the command run in a group of
// their own, with the job's memory (no swap) and process limits for them all together, and
// stopped whole once over one (OverLimit then says which). A nil j starts cmd unsandboxed.
func (j *Jail) Start(cmd *exec.Cmd) (*reaper.Process, error) {
	if j == nil {
		return reaper.Start(cmd)
	}
	if err := j.wrap(cmd, j.grouped()); err != nil {
		return nil, err
	}
	if j.grouped() {
		return j.startGrouped(cmd)
	}
	return reaper.StartWrapper(cmd)
}

// selfBinds makes webordinary's own binary visible (the demo agent is webordinary itself),
// resolved and, if need be, copied once per Sandbox rather than at every job start.
func (s *Sandbox) selfBinds() []string {
	s.selfOnce.Do(func() {
		if self, err := os.Executable(); err == nil {
			s.self = s.programBinds(self)
			if len(s.self) > 0 || s.covered(self) {
				s.selfExe = self
			}
		}
	})
	return s.self
}

// programPath is the absolute path of the program cmd runs.
func programPath(cmd *exec.Cmd) (string, error) {
	if cmd.Err != nil {
		return "", cmd.Err
	}
	p := cmd.Path
	if !filepath.IsAbs(p) {
		lp, err := exec.LookPath(p)
		if err != nil {
			return "", fmt.Errorf("sandbox: %w", err)
		}
		if p, err = filepath.Abs(lp); err != nil {
			return "", fmt.Errorf("sandbox: %w", err)
		}
	}
	return p, nil
}

// programBinds makes the program visible, read-only, when it lives outside the toolchain (a
// test binary, `go run`'s build of webordinary itself for the demo agent). A program installed
// by npm brings its whole node_modules tree (see packageTree). A program the job's user cannot
// reach (under a 0700 directory) is bound from a copy (see visibleCopy).
func (s *Sandbox) programBinds(prog string) []string {
	var out []string
	for _, p := range []string{prog, resolved(prog)} {
		if p == "" || s.covered(p) {
			continue
		}
		if tree := packageTree(p); tree != "" && s.reachable(tree) == nil {
			if !slices.Contains(out, tree) {
				out = append(out, "--ro-bind", tree, tree)
			}
			continue
		}
		src := p
		if s.reachable(p) != nil {
			c, err := s.visibleCopy(p)
			if err != nil {
				continue // bwrap could not bind it either; the job will report it missing
			}
			src = c
		}
		out = append(out, "--ro-bind", src, p)
	}
	return out
}

// packageTree is the outermost node_modules directory p lies in, "" when none. A program
// npm installed needs the files of its package and of the packages beside it: the agent CLIs'
// launchers run a native binary from an optional dependency (@openai/codex-linux-x64), and
// node resolves a link in node_modules/.bin to its package only where the link is a link.
func packageTree(p string) string {
	i := strings.Index(p, "/node_modules/")
	if i < 0 {
		return ""
	}
	return p[:i+len("/node_modules")]
}

func (j *Jail) binds() []string {
	var out []string
	for _, w := range j.spec.Writable {
		out = append(out, "--bind", w, w)
	}
	for _, r := range j.spec.ReadOnly {
		if _, err := os.Lstat(r); err == nil {
			out = append(out, "--ro-bind", r, r)
		}
	}
	return out
}

func resolved(p string) string {
	r, err := filepath.EvalSymlinks(p)
	if err != nil || r == p {
		return ""
	}
	return r
}

// covered reports whether p is under a read-only root every job sees.
func (s *Sandbox) covered(p string) bool { return s.coveredBy(p) != "" }

// coveredBy is the path of the read-only bind every job gets that p lies under, or "".
func (s *Sandbox) coveredBy(p string) string {
	for i := 0; i+2 < len(s.base); i++ {
		if s.base[i] != "--ro-bind" {
			continue
		}
		root := s.base[i+2]
		if p == root || strings.HasPrefix(p, root+"/") {
			return root
		}
	}
	return ""
}

// toolchainRoots are bound read-only when they exist; /bin, /lib... become symlinks when they
// are symlinks on the host (merged /usr).
var toolchainRoots = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt"}

// etcFiles are the /etc entries programs need for users, DNS, TLS, time zones and the dynamic
// linker; the rest of /etc (shadow, the platform's configuration) stays out.
var etcFiles = []string{"passwd", "group", "nsswitch.conf", "host.conf", "hosts", "resolv.conf", "gai.conf",
	"ssl", "ca-certificates", "ca-certificates.conf", "pki", "crypto-policies", "localtime", "timezone",
	"alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "mime.types", "os-release", "protocols", "services",
	"gitconfig", "npmrc"}

// baseArgs is every job's sandbox: namespaces, a private /proc and /dev, the read-only
// toolchain (roots, /etc files, PATH directories, extra) and no capabilities. No
// --new-session: the reaper starts bwrap in a session of its own, without a controlling
// terminal (so no TIOCSTI), and the job must stay in bwrap's process group for interrupts.
func (s *Sandbox) baseArgs() []string {
	extra := s.cfg.ReadOnly
	args := []string{"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--die-with-parent", "--hostname", "webordinary-job", "--cap-drop", "ALL",
		"--proc", "/proc", "--dev", "/dev"} // /tmp and the like: tmpfsArgs, of the job's size
	for _, r := range toolchainRoots {
		args = append(args, rootBind(r)...)
	}
	for _, e := range etcFiles {
		args = append(args, roBindResolved("/etc/"+e)...)
	}
	seen := map[string]bool{}
	for _, d := range append(pathDirs(), extra...) {
		if d = filepath.Clean(d); !seen[d] && !underRoots(d) && s.reachable(d) == nil {
			seen[d] = true
			args = append(args, roBindResolved(d)...)
		}
	}
	return args
}

func rootBind(r string) []string {
	fi, err := os.Lstat(r)
	switch {
	case err != nil:
		return nil
	case fi.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(r)
		if err != nil {
			return nil
		}
		return []string{"--symlink", target, r}
	}
	return []string{"--ro-bind", r, r}
}

// roBindResolved binds p read-only, following a symlink on the host (resolv.conf often points
// into /run).
func roBindResolved(p string) []string {
	src, err := filepath.EvalSymlinks(p)
	if err != nil {
		return nil
	}
	return []string{"--ro-bind", src, p}
}

func pathDirs() []string {
	var out []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if filepath.IsAbs(d) {
			out = append(out, d)
		}
	}
	return out
}

func underRoots(p string) bool {
	for _, r := range toolchainRoots {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// outputWithoutCaps runs cmd, as CombinedOutput does, started from a thread that passes it no
// capability (see reaper.DropAmbientCaps).
func outputWithoutCaps(cmd *exec.Cmd) ([]byte, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	started := make(chan error, 1)
	caplessThread() <- func(dropped error) {
		if dropped != nil {
			started <- dropped
			return
		}
		started <- cmd.Start()
	}
	if err := <-started; err != nil {
		return nil, err
	}
	err := cmd.Wait()
	return out.Bytes(), err
}

// caplessThread returns the queue of a goroutine locked, for the process's life, to a thread
// that dropped its ambient capabilities; it runs each function it is sent with the error of
// the drop. The thread must never end: a child's parent-death signal (the reaper's
// supervisors are started with one) fires when the thread that forked it ends, and Go ends a
// thread whose locked goroutine returns — a thread that may earlier have run the goroutine
// that started some job's supervisor, which would then be killed.
var caplessThread = sync.OnceValue(func() chan<- func(error) {
	queue := make(chan func(error))
	go func() {
		runtime.LockOSThread() // never unlocked, and the goroutine never returns
		dropped := reaper.DropAmbientCaps()
		for f := range queue {
			f(dropped)
		}
	}()
	return queue
})
