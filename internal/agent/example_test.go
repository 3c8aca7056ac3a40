package agent_test

import (
	"context"
	"fmt"
	"os"

	"github.com/webordinary/webordinary/internal/agent"
)

// A "command" agent is any shell command: the prompt arrives on stdin and in
// WO_INSTRUCTION, exit status 0 means success, and the last output line is the summary.
func ExampleRun() {
	dir, _ := os.MkdirTemp("", "site")
	defer os.RemoveAll(dir)

	spec := agent.Spec{Kind: agent.KindCommand, Command: `cat >> notes.txt && echo "noted"`}
	res, err := agent.Run(context.Background(), spec, agent.Request{Dir: dir, Prompt: "make the logo bigger\n"})
	if err != nil {
		fmt.Println("could not run the agent:", err)
		return
	}
	notes, _ := os.ReadFile(dir + "/notes.txt")
	fmt.Printf("ok=%v summary=%q notes=%q\n", res.OK, res.Summary, notes)
	// Output: ok=true summary="noted" notes="make the logo bigger\n"
}
