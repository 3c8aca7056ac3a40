package natsjs_test

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/broker/natsjs/natsjstest"
)

// TestAnEngineThatSyncsRunsMorePs: a process that starts an engine syncing every write runs
// with twice its Ps, at least four more (a goroutine in fsync holds its P); one with sync off
// keeps its Ps, and so does one whose environment sets GOMAXPROCS. Each case is a process of
// its own: the Ps are the process's.
func TestAnEngineThatSyncsRunsMorePs(t *testing.T) {
	if mode := os.Getenv("WO_TEST_PROCS"); mode != "" {
		before := runtime.GOMAXPROCS(0)
		natsjstest.Start(t, natsjstest.Options{NoSync: mode == "nosync"})
		natsjstest.Start(t, natsjstest.Options{NoSync: mode == "nosync"}) // a second engine adds none
		fmt.Printf("procs %d %d\n", before, runtime.GOMAXPROCS(0))
		return
	}
	t.Parallel()
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOMAXPROCS=") })
	procs := func(mode string, extra ...string) (before, after int) {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run", "^TestAnEngineThatSyncsRunsMorePs$", "-test.count", "1")
		cmd.Env = append(append(slices.Clone(env), "WO_TEST_PROCS="+mode), extra...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", mode, err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if _, err := fmt.Sscanf(line, "procs %d %d", &before, &after); err == nil {
				return before, after
			}
		}
		t.Fatalf("%s: no procs line in\n%s", mode, out)
		return 0, 0
	}
	if before, after := procs("sync"); after != before+max(before, 4) {
		t.Errorf("syncing engine: GOMAXPROCS %d, then %d; want %d", before, after, before+max(before, 4))
	}
	if before, after := procs("nosync"); after != before {
		t.Errorf("engine without sync: GOMAXPROCS %d, then %d; want it kept", before, after)
	}
	if before, after := procs("sync", "GOMAXPROCS=3"); before != 3 || after != 3 {
		t.Errorf("GOMAXPROCS=3 in the environment: %d, then %d; want 3 kept", before, after)
	}
}
