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
	out.WriteString(configReference)
	_ = newConfigSet().WriteReference(&out, sectionNotes)
	out.WriteString("### Example config file (`webordinary config example`)\n\n```toml\n")
	out.WriteString(exampleHeader)
	_ = newConfigSet().WriteExample(&out, sectionNotes)
	out.WriteString("```\n\n")
	out.WriteString(environmentOnly)
	return out.String()
}

// environmentOnly lists the secrets read only from the environment: never a flag or a key,
// so that they are in no command line and no file.
const environmentOnly = "### Environment only\n\n" +
	"- `WO_GIT_TOKEN`: the token workers push sites' repositories with (through a git askpass helper; never in a URL)\n" +
	"- `WO_GIT_USERNAME`: the user name sent with it (default `x-access-token`)\n" +
	"\nA secret may be given as the ARN of an AWS Secrets Manager secret instead of its value " +
	"(`engine.password`, `serve.dashboard_token`, `mail.secret`, `mail.relay_password`, and the variables " +
	"`WO_GIT_TOKEN`, `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`): serve and worker read it once at start, " +
	"in the secret's region, with the SDK's credentials (`aws.endpoint` applies). ECS's form " +
	"`ARN:json-key:version-stage:version-id` (parts may be empty: `ARN:password::`) takes one key of a JSON secret.\n"

// configReference opens the config file's part of the reference.
const configReference = "### Config file (`serve --config`, `worker --config`)\n\n" +
	"One TOML file for serve and worker; a worker ignores [serve] and [mail]. Precedence, lowest first: " +
	"the defaults below, the file, the environment variables, `--set KEY=VALUE` (repeatable), the flags. " +
	"An unknown key is an error, and so is a flag that became a key (the error names the key). " +
	"A list takes a TOML array in the file, one item per `--set` and one item in its variable; " +
	"a duration is a string such as \"90s\".\n\n"

// runReference prints the configuration reference (hidden command `reference`).
func runReference(_ context.Context, _ []string) error {
	_, err := io.WriteString(os.Stdout, flagReference())
	return err
}
