package main

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/capability"
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

// TestBenchOwnerWithDefaults runs docs/SCALING.md's `webordinary bench --only owner` as a user
// does (a fresh HOME): a real Astro site by mail, a row per email (the first job on a new
// tenant, a follow-up on its thread, a publish, a change, its publish, an undo, a new thread,
// a second tenant's first job), each job done
// and answered, with the stages' seconds. The numbers are the output; nothing here asserts a time.
func TestBenchOwnerWithDefaults(t *testing.T) {
	t.Parallel()
	capability.Need(t, capability.Node)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute) // within CI's -timeout 30m, with output
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "bench", "--only", "owner")
	cmd.Env = append(os.Environ(), "WO_TEST_AS_MAIN=1", "HOME="+t.TempDir(), "TMPDIR="+reachableTempDir(t))
	cmd.Dir = t.TempDir()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench --only owner: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	t.Logf("bench --only owner:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	rows := []string{"first job", "follow-up", "publish", "change", "publish 2", "undo", "new thread", "2nd tenant"}
	if len(lines) != 2+len(rows) || !strings.HasPrefix(lines[0], "owner: an Astro 5 site by mail") {
		t.Fatalf("want a title, a header and %d rows:\n%s", len(rows), out)
	}
	head := strings.Fields(lines[1])
	for _, col := range []string{"email", "state", "accepted", "claimed", "git", "install", "build", "agent", "deploy", "pictures", "commit", "push", "other", "reply", "total"} {
		if !slices.Contains(head, col) {
			t.Errorf("no %s column in %q", col, lines[1])
		}
	}
	for i, name := range rows {
		line := strings.TrimSpace(lines[2+i])
		row := append([]string{name}, strings.Fields(strings.TrimPrefix(line, name))...) // the cells, head's order
		if !strings.HasPrefix(line, name) || len(row) != len(head) || row[1] != "done" {
			t.Errorf("row %d %q; want %s, done, a figure per column", i+1, line, name)
			continue
		}
		if total, err := strconv.ParseFloat(row[len(row)-1], 64); err != nil || total <= 0 {
			t.Errorf("%s: total %q; want seconds", name, row[len(row)-1])
		}
		if install := row[slices.Index(head, "install")]; (name == "first job" || name == "2nd tenant") && install == "-" {
			t.Errorf("%s: the first job on a new tenant did not install:\n%s", name, out)
		}
	}
}

// TestBenchOwnerWithoutNode: without Node.js on PATH, the owner case says what to install
// and skips.
func TestBenchOwnerWithoutNode(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "bench", "--only", "owner")
	cmd.Env = []string{"WO_TEST_AS_MAIN=1", "HOME=" + t.TempDir(), "PATH=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "owner: skipped") || !strings.Contains(string(out), "install Node.js 20 or later") {
		t.Fatalf("bench --only owner without node: %v\n%s", err, out)
	}
}
