package demo

import (
	"os"
	"testing"

	"github.com/webordinary/webordinary/internal/reaper"
)

// TestMain lets the test binary act as the demo-agent command (`demo.test demo-agent`), as
// the webordinary binary does, for the tests that run it through the agent package.
func TestMain(m *testing.M) {
	reaper.Main()
	if len(os.Args) > 1 && os.Args[1] == "demo-agent" {
		wd, err := os.Getwd()
		if err != nil {
			os.Exit(1)
		}
		os.Exit(RunAgent(os.Stdin, os.Stdout, wd))
	}
	// Under -race a binary exiting with code 0 sleeps 1 s by default.
	if _, ok := os.LookupEnv("GORACE"); !ok {
		_ = os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	os.Exit(m.Run())
}
