package main

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/webordinary/webordinary/internal/awstest"
	"github.com/webordinary/webordinary/internal/reaper"
)

// TestMain lets the test binary act as webordinary: in testscript scripts (as the
// "webordinary" command) and, with WO_TEST_AS_MAIN=1, for tests that start real processes.
func TestMain(m *testing.M) {
	reaper.Main()
	if spec := os.Getenv(natsNodeEnv); spec != "" {
		runNATSNode(spec) // a clustered nats-server for TestClusterLosesANode; never returns
	}
	// The demo agent runs this binary as `<self> demo-agent` with a clean environment.
	if os.Getenv("WO_TEST_AS_MAIN") == "1" || (len(os.Args) > 1 && os.Args[1] == "demo-agent") {
		main()
		os.Exit(0)
	}
	testscript.Main(stopEmulators{m}, map[string]func(){"webordinary": main})
}

// stopEmulators runs the tests, then stops the AWS emulators they started (awstest.Main's
// job, here inside testscript.Main, which exits by itself).
type stopEmulators struct{ *testing.M }

func (m stopEmulators) Run() int {
	code := m.M.Run()
	awstest.StopShared()
	return code
}

func TestScripts(t *testing.T) {
	t.Parallel()
	testscript.Run(t, testscript.Params{Dir: "testdata/script"})
}
