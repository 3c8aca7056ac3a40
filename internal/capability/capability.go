// Package capability names the parts outside the binary that webordinary and its tests use
// when a machine has them — bubblewrap, Chromium, swaks, the AWS emulators — with one probe
// each. `webordinary doctor` lists them with what each gives and how to get it; the tests
// skip through Need with the same probe and the same words, so what doctor says is missing
// is exactly what the tests skipped.
package capability

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// A Part is something outside the binary that some features and tests need.
type Part struct {
	// Name is how people call it: "bubblewrap".
	Name string
	// Gives is what it is used for, for an operator and for a developer running the tests.
	Gives string
	// Get is how to install it.
	Get string
	// InCI is whether .ci/run installs it: under CI=true a test that needs it fails rather
	// than skips, so CI cannot pass by skipping.
	InCI bool

	probe func() error
	once  sync.Once
	err   error
}

// Check returns nil when the part is here, or why not. The probe runs once per process.
func (p *Part) Check() error {
	p.once.Do(func() { p.err = p.probe() })
	return p.err
}

// The parts. Each probe is cheap: a lookup on PATH, a stat, or one short run.
var (
	Bubblewrap = &Part{Name: "bubblewrap", InCI: true,
		Gives: "the job sandbox (serve's --sandbox auto, the hostile-job tests)",
		Get:   "apt-get install bubblewrap (and allow unprivileged user namespaces)",
		probe: bwrapRuns}
	Chromium = &Part{Name: "chromium", InCI: true,
		Gives: "pictures of each change in replies, the dashboard's and replies' browser tests",
		Get:   "apt-get install chromium (or set WO_CHROMIUM to a Chromium binary)",
		probe: func() error { return found(Browser()) }}
	Swaks = &Part{Name: "swaks", InCI: true,
		Gives: "the tests that send mail with an SMTP client nobody here wrote",
		Get:   "apt-get install swaks",
		probe: onPath("swaks")}
	Dkimsign = &Part{Name: "dkimsign", InCI: true,
		Gives: "the tests that check DKIM against a second implementation",
		Get:   "apt-get install python3-dkim",
		probe: onPath("dkimsign")}
	Curl = &Part{Name: "curl", InCI: true,
		Gives: "the tests whose job plays an agent with curl inside the sandbox",
		Get:   "apt-get install curl",
		probe: onPath("curl")}
	Node = &Part{Name: "node", InCI: true,
		Gives: "building npm sites (Astro, Eleventy) and the agent CLIs",
		Get:   "install Node.js 20 or later with npm (apt-get install nodejs npm on Debian trixie; on bookworm, Node.js from nodejs.org)",
		probe: func() error {
			if err := onPath("node")(); err != nil {
				return err
			}
			return onPath("npm")()
		}}
	Hugo = &Part{Name: "hugo", InCI: true,
		Gives: "building Hugo sites (and their tests)",
		Get:   "apt-get install --no-install-recommends hugo",
		probe: onPath("hugo")}
	AWSEmulators = &Part{Name: "aws emulators", InCI: true,
		Gives: "the AWS backend's tests (SQS, DynamoDB, S3, SES on fauxqs, dynalite, aws-ses-v2-local)",
		Get:   "bash .ci/aws-emulators (npm; into " + displayHome(AWSEmulatorDir()) + ")",
		probe: awsEmulators}
	Root = &Part{Name: "root",
		Gives: "jobs as another uid (65534) and their per-job network; the tests of both",
		Get:   "run serve (and the tests) as root, e.g. with sudo",
		probe: func() error {
			if os.Geteuid() != 0 {
				return errors.New("not running as root")
			}
			return nil
		}}
)

// All is every part, in the order doctor lists them.
func All() []*Part {
	return []*Part{Root, Bubblewrap, Chromium, Node, Hugo, Curl, Swaks, Dkimsign, AWSEmulators}
}

// TB is the part of testing.TB that Need uses (this package does not import testing, so the
// binary does not either).
type TB interface {
	Helper()
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Need skips t unless every part is here, saying which is missing and how to get it; under
// CI=true a part that .ci/run installs fails t instead.
func Need(t TB, parts ...*Part) {
	t.Helper()
	for _, p := range parts {
		err := p.Check()
		if err == nil {
			continue
		}
		if p.InCI && os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing under CI=true (%v); .ci/run installs it: %s", p.Name, err, p.Get)
			return
		}
		t.Skipf("SKIPPED: %s is missing (%v); it gives %s. Get it: %s; `go run ./cmd/webordinary doctor` lists what this machine lacks", p.Name, err, p.Gives, p.Get)
		return
	}
}

// Browser returns the Chromium to run: $WO_CHROMIUM, then Debian's real binary behind its
// /usr/bin/chromium wrapper script (the script sources /etc/chromium.d, which a sandbox does
// not show, and starts nothing we need), then chromium, chromium-browser, google-chrome on
// PATH. "" when none is installed.
func Browser() string {
	if p := os.Getenv("WO_CHROMIUM"); p != "" {
		return p
	}
	if fi, err := os.Stat("/usr/lib/chromium/chromium"); err == nil && fi.Mode().IsRegular() {
		return "/usr/lib/chromium/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// AWSEmulatorDir is where .ci/aws-emulators installs the emulators:
// $WO_AWS_EMULATORS, else ~/.cache/webordinary/aws-emulators.
func AWSEmulatorDir() string {
	if d := os.Getenv("WO_AWS_EMULATORS"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "webordinary", "aws-emulators")
}

func found(path string) error {
	if path == "" {
		return errors.New("not found")
	}
	return nil
}

func onPath(name string) func() error {
	return func() error {
		if _, err := exec.LookPath(name); err != nil {
			return errors.New("not on PATH")
		}
		return nil
	}
}

// bwrapRuns runs bubblewrap once in a user namespace: installed is not enough, the kernel or
// a container may refuse it.
func bwrapRuns() error {
	if _, err := exec.LookPath("bwrap"); err != nil {
		return errors.New("not on PATH")
	}
	out, err := exec.Command("bwrap", "--unshare-user", "--unshare-net", "--ro-bind", "/", "/", "/bin/true").CombinedOutput()
	if err != nil {
		return fmt.Errorf("installed but cannot run here: %v: %s", err, firstLine(out))
	}
	return nil
}

func awsEmulators() error {
	if _, err := exec.LookPath("node"); err != nil {
		return errors.New("node is not on PATH")
	}
	if _, err := os.Stat(filepath.Join(AWSEmulatorDir(), ".stamp")); err != nil {
		return fmt.Errorf("not installed in %s", AWSEmulatorDir())
	}
	return nil
}

func firstLine(b []byte) string {
	for i, c := range b {
		if c == '\n' {
			return string(b[:i])
		}
	}
	return string(b)
}

// displayHome shows a path under the home directory as ~/…
func displayHome(p string) string {
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		if rel, err := filepath.Rel(home, p); err == nil && filepath.IsLocal(rel) {
			return filepath.Join("~", rel)
		}
	}
	return p
}

// SetProbe replaces how p is found (for a part made outside this package, such as a test's);
// it must be called before the first Check.
func (p *Part) SetProbe(probe func() error) { p.probe = probe }
