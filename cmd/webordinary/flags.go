package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/webordinary/webordinary/internal/agentstate"
	"github.com/webordinary/webordinary/internal/app"
	"github.com/webordinary/webordinary/internal/pipeline"
	"github.com/webordinary/webordinary/internal/preview"
	"github.com/webordinary/webordinary/internal/sandbox"
	"github.com/webordinary/webordinary/internal/shots"
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

// registerWorker registers the flags of w (shared by serve and worker); defaultWorkers is
// the command's default --workers.
func registerWorker(fs *flag.FlagSet, w *app.Worker, defaultWorkers int) {
	fs.IntVar(&w.Count, "workers", defaultWorkers, "how many tenants this process serves at once (serve: 0 = router and API only)")
	fs.StringVar(&w.Processor, "processor", app.DefaultProcessor,
		"what a job does: pipeline (git, the project's agent, build, preview, push), command (run --agent-command in a per-tenant directory), or noop (benchmarks)")
	fs.StringVar(&w.AgentCommand, "agent-command", app.DefaultAgentCommand,
		"with --processor command: shell command run per job in the tenant's directory; instruction on stdin and in WO_INSTRUCTION")
	fs.StringVar(&w.Workspaces, "workspaces", "", "root of per-tenant working copies; the same path on every worker (default <data>/workspaces)")
	fs.StringVar(&w.State, "state", "", "root of per-tenant agent and build state (default <data>/state)")
	fs.StringVar(&w.Previews, "previews", "", `directory previews are deployed into, shared with the preview server (default <data>/previews); "engine": into the engine, served by any serve from there (no shared directory); see also --preview-target`)
	fs.StringVar(&w.PreviewTarget, "preview-target", "", "deploy previews to S3 instead: s3://bucket[/prefix] (serve's preview server reads the same bucket; see --aws-region)")
	fs.IntVar(&w.PreviewPort, "preview-port", app.DefaultPreviewPort, "preview server port, for the links in results (serve: its --preview port)")
	fs.StringVar(&w.PreviewDomain, "preview-domain", app.DefaultPreviewDomain, "preview host suffix: edit.<project>.<domain>")
	fs.DurationVar(&w.BuildTimeout, "build-timeout", app.DefaultBuildTimeout, "bound on a site's install and build")
	fs.StringVar(&w.ClaudeLogin, "claude-login", "", "share the Claude Code subscription login in this config directory (where `claude /login` was run, e.g. ~/.claude) with every claude agent: a read-only copy of its access token, never the refresh token or any other secret")
	fs.StringVar(&w.AgentBaseURL, "agent-base-url", "", "model API endpoint (gateway or proxy) every project's agent talks to unless the project sets its own: claude gets ANTHROPIC_BASE_URL, codex OPENAI_BASE_URL, opencode its model provider's baseURL; default: the vendors'")
	fs.DurationVar(&w.ModelRetryBudget, "model-retry-budget", pipeline.DefaultModelRetryBudget, "how long a job waits for a model service that turned its agent away (HTTP 429/529, overloaded, unreachable; its retry-after is honoured) before it fails and the owner is told; negative: no retries")
	fs.DurationVar(&w.LeaseTTL, "lease-ttl", worker.DefaultLeaseTTL, "tenant lease time to live; a crashed worker's tenants move after about this long")
	fs.DurationVar(&w.IdleRelease, "idle-release", worker.DefaultIdleRelease, "release a tenant after this long without jobs")
	fs.DurationVar(&w.Quantum, "quantum", worker.DefaultQuantum, "keep a busy tenant at most this long while other tenants wait for a worker")
	fs.DurationVar(&w.WarmFor, "warm-for", worker.DefaultWarmFor, "a released tenant's next claim goes first to this process (warm workspace) for this long, then to any; negative: off")
	fs.IntVar(&w.MaxAttempts, "max-attempts", worker.DefaultMaxAttempts, "dead-letter a job after this many failed runs")
	fs.DurationVar(&w.ShutdownGrace, "shutdown-grace", worker.DefaultShutdownGrace, "on shutdown, let a running job finish this long before handing it back")
	fs.StringVar((*string)(&w.Sandbox), "sandbox", string(sandbox.ModeAuto), "run every job (agent, install, build) in a bubblewrap sandbox: auto (sandbox when bwrap works, else warn), required, or off")
	fs.IntVar(&w.SandboxUID, "sandbox-uid", sandbox.DefaultUID, "when running as root: the unprivileged uid jobs run as")
	fs.IntVar(&w.SandboxGID, "sandbox-gid", sandbox.DefaultGID, "when running as root: the gid jobs run as")
	fs.Var((*listFlag)(&w.SandboxReadOnly), "sandbox-ro", "extra host path jobs see read-only, e.g. a toolchain outside /usr, /opt and PATH (repeatable)")
	fs.StringVar(&w.JobLimits, "job-limits", "", "bound every sandboxed job: any of mem=2GiB (per process), procs=256, cpu=10m (per process; default: none beyond the timeouts), disk=2GiB (workspace+state+home, checked after each process), tmp=512MiB (/tmp); unset ones take these defaults, \"off\" lifts one; a project's own --job-limits win")
	fs.Var((*listFlag)(&w.EgressAllow), "egress-allow", "HOST, HOST:PORT, *.DOMAIN or * (any public host) every sandboxed job may reach besides the npm registry, its remote's git host and the model APIs (repeatable)")
	fs.StringVar(&w.Shots, "shots", "", "directory for the pictures of each job's change; each machine's own with --previews engine or S3 (they travel through the engine), else shared by workers and serve like --previews (default <data>/shots)")
	fs.StringVar(&w.Packages, "packages", "", `directory of the package cache all sites' installs share: a new site whose lockfile another site used installs from it (filled by the platform, copied into a new site's npm cache; no job writes it); "off" shares nothing (default <data>/packages)`)
	fs.StringVar(&w.Chromium, "chromium", "", `headless Chromium for the pictures (default: the system's chromium); "off": no pictures`)
	fs.IntVar(&w.ShotPages, "shot-pages", shots.DefaultPages, "pages pictured per job, most relevant first")
	fs.DurationVar(&w.ShotBudget, "shot-budget", shots.DefaultPageBudget, "time budget of one picture; a page that takes longer gets none")
	fs.IntVar(&w.StateMaxBytes, "state-max-bytes", agentstate.DefaultMaxBytes,
		"largest archive of a tenant's agent state (sessions) saved to the engine after each job, so any worker resumes the thread; -1 keeps it on this machine (then --state must be shared)")
	fs.Int64Var(&w.PreviewCacheMaxBytes, "preview-cache-max-bytes", preview.DefaultCacheMax,
		"with --previews engine: bound of <data>/preview-cache, the preview files this process read from the engine (least recently used go first)")
	fs.Var((*listFlag)(&w.JobEnv), "job-env", "variable every job's agent and build get: NAME (the value from this process's environment) or NAME=VALUE (repeatable; WO_* refused)")
}

// dataUsage is the --data flag's description.
const dataUsage = "data directory: engine files, workspaces, state, previews, secrets (default $XDG_DATA_HOME/webordinary, else ~/.local/share/webordinary; as root when the jobs' user cannot enter that, " + app.DefaultSystemData + ")"

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// isSet reports whether the flag name was given (on the command line or in its variable).
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// fieldFlags name the flag of each app.Config field the CLI sets.
var fieldFlags = map[string]string{
	"Data": "data", "Engine": "engine", "EngineListen": "nats-listen", "EngineUser": "nats-user", "EnginePassword": "nats-password",
	"HTTPAddr": "http", "PreviewAddr": "preview", "PublicURL": "public-url", "Token": "dashboard-token", "ReadyFile": "ready-file",
	"ReconcileEvery": "reconcile", "InterruptPolicy": "interrupt-policy",
	"Mail.SMTPAddr": "smtp", "Mail.Domains": "mail-domain", "Mail.Secret": "mail-secret", "Mail.DNSFixture": "mail-dns-fixture",
	"Mail.TLSCert": "smtp-tls-cert", "Mail.TLSKey": "smtp-tls-key", "Mail.Relay": "smtp-relay", "Mail.LocalTesting": "mail-local-testing", "Mail.RelayTLS": "smtp-relay-tls",
	"Mail.HeldNoticeAfter": "mail-held-notice-after", "Worker.AgentBaseURL": "agent-base-url", "Worker.ClaudeLogin": "claude-login",
	"Worker.Count": "workers", "Worker.Processor": "processor", "Worker.Sandbox": "sandbox", "Worker.JobEnv": "job-env", "Worker.EgressAllow": "egress-allow",
	"Worker.LeaseTTL": "lease-ttl", "Worker.Chromium": "chromium", "Worker.ShotPages": "shot-pages", "Worker.MaxAttempts": "max-attempts", "Worker.PreviewPort": "preview-port",
	"Worker.StateMaxBytes": "state-max-bytes", "Worker.PreviewCacheMaxBytes": "preview-cache-max-bytes",
	"Worker.IdleExit":      "idle-exit",
	"Worker.PreviewTarget": "preview-target", "Mail.SES": "mail-ses", "Mail.SESQueue": "mail-ses-queue",
	"Mail.SESConfigurationSet": "mail-ses-configuration-set", "Mail.TrustedAuthServ": "mail-trusted-authserv", "Mail.TrustedRelays": "mail-trusted-relay",
	"AWS.Region": "aws-region", "AWS.Endpoint": "aws-endpoint", "AWS.S3Endpoint": "aws-s3-endpoint",
	"AWS.SQSEndpoint": "aws-sqs-endpoint", "AWS.SESEndpoint": "aws-ses-endpoint",
}

// fieldNames matches the Config field names of fieldFlags in a message, longest first.
var fieldNames = func() *regexp.Regexp {
	names := slices.Collect(maps.Keys(fieldFlags))
	slices.SortFunc(names, func(a, b string) int { return len(b) - len(a) })
	for i, n := range names {
		names[i] = regexp.QuoteMeta(n)
	}
	return regexp.MustCompile(`\b(` + strings.Join(names, "|") + `)\b`)
}()

// asFlags rewrites an app error that names Config fields to name our flags instead.
func asFlags(err error) error {
	var fe *app.FieldError
	if err == nil || !errors.As(err, &fe) {
		return err
	}
	return errors.New(fieldNames.ReplaceAllStringFunc(err.Error(), func(f string) string { return "--" + fieldFlags[f] }))
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
