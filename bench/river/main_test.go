package main

import (
	"os"
	"os/exec"
	"testing"
)

// TestRiverRuns runs the peer on a small case end to end (a real PostgreSQL, River's
// migrations, both modes) so docs/SCALING.md's command stays true. Without PostgreSQL it skips,
// except in CI, which installs it.
func TestRiverRuns(t *testing.T) {
	if _, err := exec.LookPath("initdb"); err != nil && !anyPostgres() {
		if os.Getenv("CI") != "" {
			t.Fatal("CI needs PostgreSQL for the River peer: apt-get install postgresql")
		}
		t.Skip("PostgreSQL not installed (apt-get install postgresql)")
	}
	if err := run("10x3"); err != nil {
		t.Fatal(err)
	}
}

func anyPostgres() bool {
	for _, d := range pgDirs {
		if _, err := os.Stat(d + "/initdb"); err == nil {
			return true
		}
	}
	return false
}
