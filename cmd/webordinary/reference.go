package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
)

// referenceCommands are the commands whose flags docs/REFERENCE.md lists.
var referenceCommands = []struct {
	name string
	run  func(context.Context, []string) error
	args []string
}{
	{"serve", runServe, nil},
	{"worker", runWorker, nil},
	{"project add", runProject, []string{"add"}},
	{"send", runSend, nil},
	{"status", runStatus, nil},
	{"mail send", runMail, []string{"send"}},
	{"mail inspect", runMail, []string{"inspect"}},
	{"bench", runBench, nil},
	{"aws setup", runAWS, []string{"setup"}},
}

// flagReference renders every command's -h output as Markdown.
func flagReference() string {
	var out bytes.Buffer
	prev := usageOut
	defer func() { usageOut = prev }()
	for _, c := range referenceCommands {
		var usage bytes.Buffer
		usageOut = &usage
		_ = c.run(context.Background(), append(append([]string{}, c.args...), "-h"))
		fmt.Fprintf(&out, "### `webordinary %s`\n\n```\n%s```\n\n", c.name, usage.String())
	}
	return out.String()
}

// runReference prints the configuration reference (hidden command `reference`).
func runReference(_ context.Context, _ []string) error {
	_, err := io.WriteString(os.Stdout, flagReference())
	return err
}
