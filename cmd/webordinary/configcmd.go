package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
)

// sectionNotes say what each section of the config file is for and who reads it.
var sectionNotes = map[string]string{
	"":        "Read by serve and worker.",
	"engine":  "The engine (queues, leases, records): serve and worker.",
	"serve":   "Serve's HTTP API, dashboard, preview server and router; a worker ignores it.",
	"worker":  "The workers of this process (serve's and worker's) and what a job does.",
	"sandbox": "The bubblewrap sandbox every job runs in (serve's workers and worker).",
	"mail":    "Mail in and out (serve); a worker ignores it.",
	"aws":     "The AWS services of S3 previews and SES mail (serve and worker).",
	"log":     "Logging (serve and worker).",
}

const configUsage = `Usage: webordinary config <keys|example>

  keys     list every key of the config file: default, environment variable, meaning
  example  print a config file that sets every key to its default (all commented out)

serve and worker read the file given with --config FILE (or WO_CONFIG); --set KEY=VALUE
sets one key over the file and the environment, a flag over both.
`

// runConfig prints the config file's keys or an example file.
func runConfig(_ context.Context, args []string) error {
	if len(args) != 1 {
		fmt.Fprint(usageOut, configUsage)
		return usageError{"config", fmt.Errorf("want keys or example")}
	}
	var out bytes.Buffer
	var err error
	switch args[0] {
	case "keys":
		err = newConfigSet().WriteKeys(&out)
	case "example":
		out.WriteString(exampleHeader)
		err = newConfigSet().WriteExample(&out, sectionNotes)
	case "-h", "--help", "help":
		fmt.Fprint(usageOut, configUsage)
		return nil
	default:
		return usageError{"config", fmt.Errorf("unknown subcommand %q: want keys or example", args[0])}
	}
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(out.Bytes())
	return err
}

// exampleHeader opens the example config file.
const exampleHeader = `# webordinary config file (TOML), for serve and worker: webordinary serve --config FILE.
# Every key is shown at its default, commented out: uncomment and change what you need.
# Precedence, lowest first: defaults, this file, environment variables, --set KEY=VALUE, flags.
`
