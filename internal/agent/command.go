package agent

import (
	"fmt"
	"slices"
)

// command runs a shell command as the agent: the prompt on stdin and in WO_INSTRUCTION, exit
// status 0 means success.
type command struct{}

var _ adapter = command{}

func (command) program(Spec) (string, string) {
	return "/bin/sh", "install a POSIX shell at /bin/sh"
}

// credentials are every known model credential: the command may wrap any agent.
func (command) credentials() []string {
	return slices.Concat(anthropicEnv, bedrockEnv, openaiEnv)
}

// invoke runs sh -c spec.Command. The system prompt, when set, is in WO_SYSTEM_PROMPT, and
// Spec.BaseURL in WO_MODEL_BASE_URL.
func (command) invoke(spec Spec, req Request) (invocation, parser) {
	env := []string{"WO_INSTRUCTION=" + req.Prompt}
	if req.SystemPrompt != "" {
		env = append(env, "WO_SYSTEM_PROMPT="+req.SystemPrompt)
	}
	if spec.BaseURL != "" {
		env = append(env, "WO_MODEL_BASE_URL="+spec.BaseURL)
	}
	inv := invocation{args: []string{"-c", spec.Command}, stdin: req.Prompt, env: env}
	return inv, commandParser{session: req.Session}
}

// commandParser reads no events: the command has no session of its own, so the thread's
// session id is passed through unchanged.
type commandParser struct{ session string }

func (commandParser) line([]byte) {}

func (p commandParser) judge(res *Result) {
	res.Session = p.session
	res.OK = res.ExitCode == 0
	res.Summary = firstNonEmpty(lastLine(res.OutputTail), fmt.Sprintf("command exited with status %d", res.ExitCode))
	if !res.OK {
		res.Error = fmt.Sprintf("command exited with status %d", res.ExitCode)
	}
}
