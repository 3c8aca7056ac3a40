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
	// reference prints the flag reference that docs/REFERENCE.md holds (kept true by a test).
	"reference": runReference,
	"status":    runStatus,
	"job":       runJob,
	"tenant":    runTenant,
	"health":    runHealth,
	"bench":     runBench,
	"aws":       runAWS,
	"config":    runConfig,
	"doctor":    runDoctor,
	"version":   func(context.Context, []string) error { fmt.Println("webordinary", version); return nil },
}

const usage = `webordinary edits websites by email.

Usage: webordinary <command> [flags]

Commands:
  demo     try it: a sample site, a sample email, the whole flow (start here)
  serve    run everything in one process: engine, router, workers, HTTP API
  worker   run a generic worker against a NATS server (scale-out)
  project  add, list, show, update or remove projects (sites)
  send     submit an instruction to a running serve (--wait for the result)
  mail     send an instruction by email (local testing), inspect a raw email, the quarantine
  job      show, wait for or interrupt one job
  tenant   request a claim for a tenant, or release it (--force: from a hung worker)
  status   show leases, pending jobs, workers and recent jobs
  health   exit 0 when a serve answers (for container health checks)
  bench    measure the control plane (dispatch latency, throughput, failover, fairness)
  aws      set up the queues, tables and buckets of an AWS install (aws setup)
  config   list the config file's keys, or print an example file (serve, worker --config)
  doctor   list what this machine lacks (bubblewrap, Chromium, emulators) and how to get it
  version  print the version

Run 'webordinary <command> -h' for a command's flags. Every flag can also be set with an
environment variable: --http is WO_HTTP. serve and worker take the rest of their settings
from a config file (--config FILE; 'webordinary config keys' lists them), each with its
variable too: worker.lease_ttl is WO_LEASE_TTL. Commands that talk to serve print for
people; add --json for scripts.
`

func main() {
	reaper.Main()
	usageOut = os.Stdout // -h is asked for: its answer goes to stdout, with exit status 0
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	name, args := os.Args[1], os.Args[2:]
	switch name {
	case "-h", "--help", "help":
		if len(args) == 0 {
			fmt.Print(usage)
			os.Exit(0)
		}
		name, args = args[0], []string{"-h"}
	}
	run, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "webordinary: unknown command %q\n\n%s", name, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(exitCode(name, run(ctx, args)))
}

// exitCode prints err (once, with a hint for a bad command line) and returns the exit status.
func exitCode(name string, err error) int {
	var (
		exit  exitError
		usage usageError
	)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &exit):
		return int(exit)
	case errors.As(err, &usage):
		fmt.Fprintf(os.Stderr, "webordinary %s: %v\nrun `webordinary %s -h` for its flags\n", usage.command, usage.err, usage.command)
		return 2
	}
	fmt.Fprintf(os.Stderr, "webordinary %s: %v\n", name, err)
	return 1
}

// exitError ends the program with a code and no message (the command already printed).
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
