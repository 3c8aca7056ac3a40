package reaper

import (
	"os"
	"syscall"
)

// Test-only access to internals, for package reaper_test.
var (
	ParseStat   = parseStat
	ReadStat    = readStat
	Descendants = descendants
)

// ProcStat is procStat, for package reaper_test.
type ProcStat = procStat

// SetSupervisorPdeathsig sets the parent-death signal of supervisors started
// afterwards (0 disables it). Not safe for concurrent use with Start.
func SetSupervisorPdeathsig(sig syscall.Signal) { supervisorPdeathsig = sig }

// LivenessPipe returns the write end of p's liveness pipe.
func LivenessPipe(p *Process) *os.File { return p.live }
