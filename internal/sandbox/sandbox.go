// Package sandbox runs a job's processes — the agent, the site's install and build, the repair
// turn, the command processor's command — inside Linux namespaces through bubblewrap (bwrap).
//
// A sandboxed process sees its tenant's writable paths (workspace, agent state, home), a private
// /tmp, a private /proc of its own PID namespace, a minimal /dev and a read-only toolchain
// (/usr, the libraries, a few /etc files DNS and TLS need, the directories on PATH, the program
// itself) — not the data dir, the spools, the engine's credentials, other tenants' files or the
// platform's processes. The workspace's .git is read-only inside, so a job cannot plant hooks or
// configuration that the platform's own git would run. When the platform runs as root, the job
// runs as an unprivileged uid (Config.UID), and Own gives it the files it must write.
//
// Mode auto probes bwrap at New and, where it cannot work (no user namespaces), runs jobs
// unsandboxed with a warning in Status; mode required refuses to start; mode off never
// sandboxes.
package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/webordinary/webordinary/internal/cgroup"
)

// Mode says whether jobs must, may or must not run in the sandbox.
type Mode string

// Modes.
const (
	ModeAuto     Mode = "auto"
	ModeRequired Mode = "required"
	ModeOff      Mode = "off"
)

// DefaultUID and DefaultGID are the job's identity when the platform runs as root: nobody and
// nogroup on Debian. A dedicated uid is better where other daemons run as nobody.
const (
	DefaultUID = 65534
	DefaultGID = 65534
)

// ErrUnavailable means mode required was asked for where bwrap cannot run.
var ErrUnavailable = errors.New("sandbox unavailable")

// Config configures the sandbox.
type Config struct {
	// Mode is auto (default), required or off.
	Mode Mode
	// UID and GID are the job's identity when the platform runs as root; 0 means the defaults
	// (65534). Ignored when the platform is not root (the job keeps the platform's uid, mapped
	// into its own user namespace).
	UID, GID int
	// ReadOnly lists extra host paths a job sees read-only (toolchains installed outside /usr
	// and /opt that are not on PATH).
	ReadOnly []string
	// Bwrap is the bubblewrap binary; default "bwrap" on PATH.
	Bwrap string
	// Roots are the directories jobs' files live under (workspaces, agent state). New checks
	// that the job's identity can reach them and probes bwrap inside the first one.
	Roots []string
	// Limits bound every job's processes; what they leave unset comes from DefaultLimits, and a
	// job's Spec.Limits (its project's) override them.
	Limits Limits
}

// Sandbox is a probed sandbox configuration, safe for concurrent use.
type Sandbox struct {
	cfg    Config
	bwrap  string // "" when jobs run unsandboxed
	reason string // why jobs run unsandboxed (mode auto or off)
	root   bool   // the platform runs as root: jobs switch to cfg.UID
	base   []string

	cg       *cgroup.Hierarchy // where each job process gets a group; nil: rlimits only
	cgReason string            // why cg is nil

	copyMu   sync.Mutex // serializes visibleCopy
	selfOnce sync.Once
	self     []string // bwrap arguments binding webordinary's own binary (selfBinds)
	selfExe  string   // its path, where jobs find it; "" if they cannot
}

// New validates cfg and, unless the mode is off, probes bwrap by running a command in a
// sandbox like a job's. Mode required returns ErrUnavailable (saying why) when the probe fails;
// mode auto returns a Sandbox that runs jobs unsandboxed and says so in Status.
func New(cfg Config) (*Sandbox, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Sandbox{cfg: cfg, root: os.Geteuid() == 0}
	if cfg.Mode == ModeOff {
		s.reason = "turned off (--sandbox off)"
		return s, nil
	}
	err = s.probe()
	var setup *setupError
	switch {
	case errors.As(err, &setup):
		// bwrap works, but only for paths the job's user can enter: a setup error, not a
		// reason to run unsandboxed.
		return nil, fmt.Errorf("sandbox: %w", setup.err)
	case err == nil:
	case cfg.Mode == ModeRequired:
		return nil, fmt.Errorf("%w: %v (install bubblewrap and allow unprivileged user namespaces, or use mode auto)", ErrUnavailable, err)
	default:
		s.bwrap, s.reason = "", err.Error()
	}
	if s.Active() {
		s.openCgroups()
	}
	return s, nil
}

// checkPrivate refuses roots (the directories every tenant's files live under) that every
// job would see: below a path all jails bind read-only (the toolchain roots, PATH directories,
// Config.ReadOnly), each job could read every other tenant's workspace and state.
func (s *Sandbox) checkPrivate(roots ...string) error {
	for _, r := range roots {
		r = filepath.Clean(r)
		candidates := []string{r}
		if real, err := filepath.EvalSymlinks(r); err == nil {
			candidates = append(candidates, real)
		}
		for _, p := range candidates {
			if bind := s.coveredBy(p); bind != "" {
				return fmt.Errorf("jobs' files would live in %s, under %s, which every job sees read-only "+
					"(the toolchain, a PATH directory or sandbox.read_only), so each job could read every site's files: "+
					"put the data directory elsewhere (the default for root is %s) or take %s out of sandbox.read_only", r, bind, "/var/lib/webordinary", bind)
			}
		}
	}
	return nil
}

func (c Config) withDefaults() (Config, error) {
	switch c.Mode {
	case "":
		c.Mode = ModeAuto
	case ModeAuto, ModeRequired, ModeOff:
	default:
		return c, fmt.Errorf("sandbox mode %q: use auto, required or off", c.Mode)
	}
	if c.UID == 0 {
		c.UID = DefaultUID
	}
	if c.GID == 0 {
		c.GID = DefaultGID
	}
	if c.UID < 0 || c.GID < 0 {
		return c, fmt.Errorf("sandbox uid %d / gid %d: must be positive (a job never runs as root)", c.UID, c.GID)
	}
	if c.Bwrap == "" {
		c.Bwrap = "bwrap"
	}
	c.Limits = c.Limits.Over(DefaultLimits)
	return c, nil
}

// probe finds bwrap and runs /bin/true in a sandbox as a job would be.
func (s *Sandbox) probe() error {
	path, err := exec.LookPath(s.cfg.Bwrap)
	if err != nil {
		return fmt.Errorf("bubblewrap not found (%s): install the bubblewrap package", s.cfg.Bwrap)
	}
	s.bwrap = path
	s.base = s.baseArgs()
	if err := s.checkPrivate(s.cfg.Roots...); err != nil {
		return &setupError{err}
	}
	if err := s.CheckReachable(s.cfg.Roots...); err != nil {
		return &setupError{err}
	}
	parent := ""
	if len(s.cfg.Roots) > 0 {
		parent = s.cfg.Roots[0]
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp(parent, "wo-sandbox-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := s.Own(dir); err != nil {
		return err
	}
	cmd := exec.Command("/bin/true")
	if err := s.Jail(Spec{Writable: []string{dir}}).Wrap(cmd); err != nil {
		return err
	}
	if out, err := outputWithoutCaps(cmd); err != nil {
		return fmt.Errorf("bwrap does not work here: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// setupError is a configuration the sandbox cannot work with, whatever the mode.
type setupError struct{ err error }

func (e *setupError) Error() string { return e.err.Error() }

// Active reports whether jobs run sandboxed.
func (s *Sandbox) Active() bool { return s != nil && s.bwrap != "" }

// Status is what startup, /api/status and the dashboard show.
type Status struct {
	Mode   Mode   `json:"mode"`
	Active bool   `json:"active"`
	User   string `json:"user,omitempty"` // the job's uid:gid when it differs from the platform's
	// Warning is set when jobs run unsandboxed: they can read the platform's files and
	// processes (environment variables included) as its user.
	Warning string `json:"warning,omitempty"`
	// Limits are what bounds every job and how ("cgroup v2 mem=2GiB,procs=256,disk=2GiB,
	// tmp=512MiB", "cgroup v1 ..." or "rlimits ...", see LimitsMode); empty when jobs run
	// unsandboxed (then nothing bounds them).
	Limits string `json:"limits,omitempty"`
	// NoCgroup says why job limits are rlimits only (no control group could be made), and
	// what is then at risk.
	NoCgroup string `json:"no_cgroup,omitempty"`
}

// Status describes the sandbox in use.
func (s *Sandbox) Status() Status {
	if s == nil {
		return Status{Mode: ModeOff, Warning: "jobs run UNSANDBOXED: no sandbox configured"}
	}
	st := Status{Mode: s.cfg.Mode, Active: s.Active()}
	if !st.Active {
		st.Warning = "jobs run UNSANDBOXED (" + s.reason + "): agent and build code can read everything the platform's user can, its processes' environments included"
		return st
	}
	if s.root {
		st.User = fmt.Sprintf("%d:%d", s.cfg.UID, s.cfg.GID)
	}
	st.Limits = s.limitsStatus()
	if s.cg == nil {
		st.NoCgroup = s.cgReason + ": a job's processes together may use its process limit times its memory limit"
	}
	return st
}

// String is a one-line description for startup banners.
func (s *Sandbox) String() string {
	st := s.Status()
	limits := st.Limits
	if st.NoCgroup != "" {
		limits += " (no cgroup: " + st.NoCgroup + ")"
	}
	switch {
	case st.Warning != "":
		return "WARNING: " + st.Warning
	case st.User != "":
		return fmt.Sprintf("bubblewrap (%s), jobs run as uid:gid %s; job limits: %s", s.bwrap, st.User, limits)
	}
	return fmt.Sprintf("bubblewrap (%s), jobs run in their own user namespace; job limits: %s", s.bwrap, limits)
}

// Short is the sandbox in a few words, for worker presence: "bubblewrap, uid:gid
// 65534:65534; cgroup v2 mem=2GiB,procs=256,disk=2GiB,tmp=512MiB", "bubblewrap, user
// namespace; rlimits ..." or "UNSANDBOXED".
func (s *Sandbox) Short() string {
	st := s.Status()
	switch {
	case !st.Active:
		return "UNSANDBOXED"
	case st.User != "":
		return "bubblewrap, uid:gid " + st.User + "; " + st.Limits
	}
	return "bubblewrap, user namespace; " + st.Limits
}

// credential is what a job process is started as: the job uid when the platform is root.
func (s *Sandbox) credential() *syscall.Credential {
	if !s.Active() || !s.root {
		return nil
	}
	return &syscall.Credential{Uid: uint32(s.cfg.UID), Gid: uint32(s.cfg.GID), Groups: []uint32{}}
}
