// Command webordinary edits websites by email: see README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/webordinary/webordinary/internal/reaper"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

var commands = map[string]func(ctx context.Context, args []string) error{
	"serve": runServe,
	"demo":  runDemo,
	// demo-agent is the demo agent's process (see demo).
	"demo-agent": runDemoAgent,
	"worker":     runWorker,
	"send":       runSend,
	"project":    runProject,
	"mail":       runMail,
	// reference prints the flag reference that README.md embeds (kept true by a test).
	"reference": runReference,
	"status":    runStatus,
	"bench":     runBench,
	"version":   func(context.Context, []string) error { fmt.Println("webordinary", version); return nil },
}

const usage = `webordinary edits websites by email.

Usage: webordinary <command> [flags]

Commands:
  demo     try it: a sample site, a sample email, the whole flow (start here)
  serve    run everything in one process: engine, router, workers, HTTP API
  worker   run a generic worker against a NATS server (scale-out)
  project  add, list, show or remove projects (sites)
  mail     inspect a raw email as the mail router sees it
  send     submit an instruction to a running serve
  status   show leases, pending jobs, workers and recent jobs
  bench    measure the control plane (dispatch latency, throughput, failover, fairness)
  version  print the version

Run 'webordinary <command> -h' for a command's flags. Every flag can also be set with an
environment variable: --lease-ttl is WO_LEASE_TTL.
`

func main() {
	reaper.Main()
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	run, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "webordinary: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[2:])
	var exit exitError
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	case errors.As(err, &exit):
		os.Exit(int(exit))
	case err != nil:
		fmt.Fprintf(os.Stderr, "webordinary %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// exitError ends the program with a code and no message (the command already printed).
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
