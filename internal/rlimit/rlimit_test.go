package rlimit_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/rlimit"
)

func TestMain(m *testing.M) {
	rlimit.Main()
	os.Exit(m.Run())
}

// The shim sets the limits, removes its variable and runs the command, which inherits them.
func TestShimLimitsTheCommand(t *testing.T) {
	t.Parallel()
	l := rlimit.Limits{Data: 256 << 20, Procs: 77, CPUSeconds: 30, FileSize: 4 << 20}
	cmd := exec.Command(os.Args[0], "/bin/sh", "-c", `cat /proc/self/limits; echo "[$WO_RLIMITS]"; echo "oom $(cat /proc/self/oom_score_adj)"`)
	cmd.Env = []string{"PATH=/usr/bin:/bin", rlimit.Env(l)}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("shim: %v: %s", err, out)
	}
	for _, want := range []string{
		`Max cpu time\s+30\s+31\s`,
		`Max file size\s+4194304\s+4194304\s`,
		`Max data size\s+268435456\s+268435456\s`,
		`Max processes\s+77\s+77\s`,
		`\[\]`,       // the variable is gone
		`oom 1000\b`, // the OOM killer takes the job before the platform
	} {
		if !regexp.MustCompile(want).Match(out) {
			t.Errorf("the command's limits lack %s:\n%s", want, out)
		}
	}
}

func TestShimRefusesBadInput(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"data=x", "heap=1", ""} {
		cmd := exec.Command(os.Args[0], "/bin/true")
		cmd.Env = []string{rlimit.EnvVar + "=" + v}
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "rlimit") {
			t.Errorf("WO_RLIMITS=%q: %v: %s", v, err, out)
		}
	}
}

func TestEncodeDecode(t *testing.T) {
	t.Parallel()
	l := rlimit.Limits{Data: 1, Procs: 2, CPUSeconds: 3, FileSize: 4}
	if got, err := rlimit.Decode(l.Encode()); err != nil || got != l {
		t.Fatalf("Decode(Encode(%+v)) = %+v, %v", l, got, err)
	}
}
