package main

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestBenchThroughputWithDefaults runs docs/SCALING.md's `webordinary bench --only throughput` as a
// user does (default flags, a fresh HOME): four figures, on 8 workers in each of two
// processes, how busy the machine was, and no error logged. A bad --workers says what to give.
func TestBenchThroughputWithDefaults(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, os.Args[0], args...)
		cmd.Env = append(os.Environ(), "WO_TEST_AS_MAIN=1", "HOME="+t.TempDir())
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("bench", "--only", "throughput")
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	var figures int
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "throughput ") {
			figures++
			if !strings.Contains(line, "16 workers in 2 processes") || !strings.Contains(line, "jobs/s") {
				t.Errorf("figure %q; want jobs/s on 16 workers in 2 processes", line)
			}
			if runtime.GOOS == "linux" && !strings.Contains(line, " cores busy") {
				t.Errorf("figure %q; want how many cores were busy (from /proc/stat)", line)
			}
		}
		if strings.Contains(line, "ERROR") {
			t.Errorf("bench logged an error: %s", line)
		}
	}
	if figures != 4 {
		t.Errorf("%d throughput figures; want 4 (100x20 and 1000x1, end to end and drained)\n%s", figures, out)
	}
	out, err = run("bench", "--workers", "0")
	if err == nil || !strings.Contains(out, "--workers 0: give 1 to 256 workers per process") {
		t.Errorf("bench --workers 0: %v\n%s", err, out)
	}
}
