package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/worker"
)

// usageOut receives flag usage (stderr; the reference generator captures it).
var usageOut io.Writer = os.Stderr

// newFlags returns a flag set whose usage lists each flag's environment variable.
func newFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(usageOut)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: webordinary %s %s\n\nFlags (environment variable in brackets):\n", name, synopsis)
		fs.VisitAll(func(f *flag.Flag) {
			def := ""
			if f.DefValue != "" && !strings.Contains(f.Usage, "(default") {
				def = fmt.Sprintf(" (default %q)", f.DefValue)
			}
			fmt.Fprintf(fs.Output(), "  --%s [%s]\n    \t%s%s\n", f.Name, envName(f.Name), f.Usage, def)
		})
	}
	return fs
}

func envName(flagName string) string {
	return "WO_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parse applies environment variables to flags not given on the command line, then args.
func parse(fs *flag.FlagSet, args []string) error {
	_, err := parseWith(fs, args, 0)
	return err
}

// parseWith is parse allowing up to max positional arguments, before or after the flags.
func parseWith(fs *flag.FlagSet, args []string, max int) ([]string, error) {
	var pos []string
	for len(args) > 0 {
		if err := parseQuiet(fs, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	if len(pos) > max {
		return nil, usageError{fs.Name(), fmt.Errorf("unexpected argument %q", pos[max])}
	}
	return pos, applyEnv(fs)
}

func applyEnv(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := os.LookupEnv(envName(f.Name)); ok && !set[f.Name] && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %w", envName(f.Name), v, e)
			}
		}
	})
	return err
}

// workerFlags are shared by serve and worker.
type workerFlags struct {
	workers       int
	processor     string
	agentCommand  string
	workspaces    string
	state         string
	previews      string
	previewPort   int
	previewDomain string
	buildTimeout  time.Duration
	leaseTTL      time.Duration
	idleRelease   time.Duration
	quantum       time.Duration
	maxAttempts   int
	grace         time.Duration
	job           *jobFlags
}

func (w *workerFlags) register(fs *flag.FlagSet, defaultWorkers int) {
	fs.IntVar(&w.workers, "workers", defaultWorkers, "how many tenants this process serves at once (serve: 0 = router and API only)")
	fs.StringVar(&w.processor, "processor", "pipeline",
		"what a job does: pipeline (git, the project's agent, build, preview, push), command (run --agent-command in a per-tenant directory), or noop (benchmarks)")
	fs.StringVar(&w.agentCommand, "agent-command", `echo "$WO_INSTRUCTION" >> instructions.log && echo "recorded instruction for $WO_PROJECT/$WO_USER"`,
		"with --processor command: shell command run per job in the tenant's directory; instruction on stdin and in WO_INSTRUCTION")
	fs.StringVar(&w.workspaces, "workspaces", "", "root of per-tenant working copies; the same path on every worker (default <data>/workspaces)")
	fs.StringVar(&w.state, "state", "", "root of per-tenant agent and build state (default <data>/state)")
	fs.StringVar(&w.previews, "previews", "", "directory previews are deployed into; shared with the preview server (default <data>/previews)")
	fs.IntVar(&w.previewPort, "preview-port", 8081, "preview server port, for the links in results")
	fs.StringVar(&w.previewDomain, "preview-domain", "localhost", "preview host suffix: edit.<project>.<domain>")
	fs.DurationVar(&w.buildTimeout, "build-timeout", 10*time.Minute, "bound on a site's install and build")
	fs.DurationVar(&w.leaseTTL, "lease-ttl", 15*time.Second, "tenant lease time to live; a crashed worker's tenants move after about this long")
	fs.DurationVar(&w.idleRelease, "idle-release", 30*time.Minute, "release a tenant after this long without jobs")
	fs.DurationVar(&w.quantum, "quantum", 500*time.Millisecond, "keep a busy tenant at most this long while other tenants wait for a worker")
	fs.IntVar(&w.maxAttempts, "max-attempts", 3, "dead-letter a job after this many failed runs")
	fs.DurationVar(&w.grace, "shutdown-grace", 10*time.Second, "on shutdown, let a running job finish this long before handing it back")
	w.job = &jobFlags{}
	w.job.register(fs)
}

// defaults fills the directories from the data directory.
func (w *workerFlags) defaults(data string) {
	for _, d := range []struct {
		p    *string
		name string
	}{{&w.workspaces, "workspaces"}, {&w.state, "state"}, {&w.previews, "previews"}} {
		if *d.p == "" {
			*d.p = filepath.Join(data, d.name)
		}
		// Absolute: jobs run in other directories (and the sandbox binds by absolute path).
		if abs, err := filepath.Abs(*d.p); err == nil {
			*d.p = abs
		}
	}
}

func (w *workerFlags) config() worker.Config {
	return worker.Config{Workers: w.workers, LeaseTTL: w.leaseTTL, IdleRelease: w.idleRelease,
		Quantum: w.quantum, MaxAttempts: w.maxAttempts, ShutdownGrace: w.grace}
}

type logFlags struct{ level, format string }

func (l *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.level, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&l.format, "log-format", "text", "text or json")
}

func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch l.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use text or json", l.format)
}
