package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/capability"
)

// TestDoctorSaysWhatIsMissingAndHow runs `webordinary doctor` as a user on a machine that has
// none of the parts (an empty PATH, a fresh HOME): every part is listed, each missing one
// with what it gives and how to get it, and the command still succeeds.
func TestDoctorSaysWhatIsMissingAndHow(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "doctor")
	cmd.Env = []string{"WO_TEST_AS_MAIN=1", "HOME=" + t.TempDir(), "PATH=" + t.TempDir(), "NO_COLOR=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	for _, p := range capability.All() {
		if p == capability.Root || p == capability.Chromium {
			continue // whoever runs the test; Debian's Chromium is found by its path, not on PATH
		}
		if !strings.Contains(string(out), "missing  "+p.Name) || !strings.Contains(string(out), "get it: "+p.Get) {
			t.Errorf("doctor with an empty PATH does not say %s is missing and how to get it:\n%s", p.Name, out)
		}
	}
	if !strings.Contains(string(out), "missing: the tests that need them skip and say so") {
		t.Errorf("doctor does not end with what the missing parts mean for the tests:\n%s", out)
	}
}

// fakeTB records what Need does to a test.
type fakeTB struct{ skipped, failed string }

func (f *fakeTB) Helper()                          {}
func (f *fakeTB) Skipf(format string, args ...any) { f.skipped = format }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = format
}

// TestNeedFailsUnderCIForWhatCIInstalls: a missing part .ci/run installs fails the test under
// CI=true (CI cannot pass by skipping); elsewhere the test skips.
func TestNeedFailsUnderCIForWhatCIInstalls(t *testing.T) {
	gone := &capability.Part{Name: "gone", Get: "apt-get install gone", InCI: true}
	gone.SetProbe(func() error { return os.ErrNotExist })
	t.Setenv("CI", "true")
	var ci fakeTB
	capability.Need(&ci, gone)
	if ci.failed == "" || ci.skipped != "" {
		t.Errorf("under CI=true a missing part CI installs: failed %q, skipped %q; want a failure", ci.failed, ci.skipped)
	}
	t.Setenv("CI", "")
	var here fakeTB
	capability.Need(&here, gone)
	if here.skipped == "" || here.failed != "" {
		t.Errorf("without CI a missing part: failed %q, skipped %q; want a skip", here.failed, here.skipped)
	}
}
