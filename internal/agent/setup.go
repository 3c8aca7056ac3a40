package agent

import "strings"

// Exit statuses of a shell (or env) that could not run a program.
const (
	exitNotExecutable = 126 // found, but not executable or not permitted
	exitNotFound      = 127 // not found (or not visible in the sandbox)
)

// missingDependency are output lines of a program one of whose dependencies is not installed:
// Python (pandas' optional dependencies, a missing module), Node, the dynamic linker.
var missingDependency = []string{"Missing optional dependency", "ModuleNotFoundError: No module named",
	"Cannot find module '", "error while loading shared libraries"}

// setupFailure is Result.Setup for a finished run: why it failed for a reason of the
// machine's setup, or "". own says the output is the program's own: kind command's, or an
// agent CLI's that printed no event (its npm launcher's: "Missing optional dependency
// @openai/codex-linux-x64"). Once an agent started, its output also carries what its tools
// printed, so only the exit status counts there.
func setupFailure(res Result, own bool) string {
	if res.OK || res.Interrupted || res.TimedOut != "" {
		return ""
	}
	switch res.ExitCode {
	case exitNotFound:
		return "a program it runs was not found (exit status 127): " +
			firstNonEmpty(lineWith(res.OutputTail, "not found", "No such file"), lastLine(res.OutputTail))
	case exitNotExecutable:
		return "a program it runs could not be executed (exit status 126: not executable, or not permitted): " + lastLine(res.OutputTail)
	}
	if !own {
		return ""
	}
	if l := lineWith(res.OutputTail, missingDependency...); l != "" {
		return "a dependency it needs is not installed: " + l
	}
	return ""
}

// lineWith is the last line of s that contains one of subs, trimmed; "" when none does.
func lineWith(s string, subs ...string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		for _, sub := range subs {
			if strings.Contains(lines[i], sub) {
				return strings.TrimSpace(lines[i])
			}
		}
	}
	return ""
}
