package sandbox

import (
	"testing"

	"github.com/webordinary/webordinary/internal/cgroup"
)

// TestAnOOMFromAboveIsNotTheJobsLimit: a job process the kernel killed while memory ran out
// above its group (the host, an ancestor's limit) did not pass its own limit, so it is not
// told it used too much; one killed at its own limit is.
func TestAnOOMFromAboveIsNotTheJobsLimit(t *testing.T) {
	l := Limits{Memory: 1 << 30, Procs: 64}
	if e := l.passed(cgroup.Stats{OOMKills: 1}); e != nil {
		t.Errorf("an OOM kill from above the group is blamed on the job: %v", e.What)
	}
	if e := l.passed(cgroup.Stats{OOMKills: 1, MemoryFull: 1}); e == nil || e.Key != "mem" {
		t.Errorf("an OOM kill at the group's own limit: %+v, want the mem limit", e)
	}
}
