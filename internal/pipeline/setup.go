package pipeline

import (
	"fmt"
	"path/filepath"

	"github.com/webordinary/webordinary/internal/agent"
	"github.com/webordinary/webordinary/internal/sandbox"
)

// setupError is the error of an agent run that failed for a reason of the machine's setup
// (agent.Result.Setup): the same run fails again whatever the owner writes, so it is the
// operator's to fix, and it says how. "setup problem" classes it for the owner's reply.
func (r *run) setupError(spec agent.Spec, res agent.Result) string {
	return fmt.Sprintf("setup problem: the %s agent failed for a reason of this machine, not of the instruction: %s; operator: %s",
		spec.Kind, res.Setup, r.setupFix(spec, res))
}

// setupFix is what the operator does: show jobs a path of the command they cannot see, or
// install what is missing where jobs see it.
func (r *run) setupFix(spec agent.Spec, res agent.Result) string {
	jail := r.agentJail()
	for _, p := range sandbox.CommandPaths(spec.Command) {
		if !jail.Sees(p) {
			return fmt.Sprintf("jobs run in a sandbox that does not see %s: add %s to sandbox.read_only (serve's and workers' config) and restart", p, filepath.Dir(p))
		}
	}
	if res.ExitCode == 126 || res.ExitCode == 127 {
		return "install the program on the workers, on PATH or under a sandbox.read_only path, or fix the project's agent command (webordinary project update)"
	}
	return "install the missing dependency on the workers where jobs see it (the toolchain, PATH or a sandbox.read_only path)"
}
