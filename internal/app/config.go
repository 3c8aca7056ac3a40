package app

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/agentstate"
	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/natsjs"
	"github.com/webordinary/webordinary/internal/conf"
	"github.com/webordinary/webordinary/internal/mail/inbound"
	"github.com/webordinary/webordinary/internal/mail/intake"
	"github.com/webordinary/webordinary/internal/mail/message"
	"github.com/webordinary/webordinary/internal/mail/sesin"
	"github.com/webordinary/webordinary/internal/pipeline"
	"github.com/webordinary/webordinary/internal/preview"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/sandbox"
	"github.com/webordinary/webordinary/internal/shots"
	"github.com/webordinary/webordinary/internal/worker"
)

// Role is what a process runs.
type Role string

// Roles.
const (
	// RoleServe runs everything: engine (or a connection to one), router, HTTP API and
	// dashboard, preview server, mail, and Worker.Count workers.
	RoleServe Role = "serve"
	// RoleWorker runs only workers, against an engine elsewhere (Config.Engine).
	RoleWorker Role = "worker"
)

// Defaults. Fields whose zero value means "none" (PreviewAddr, EngineListen, Mail.SMTPAddr)
// are not defaulted by Validate: these constants are the CLI's defaults for them.
const (
	DefaultHTTPAddr        = "127.0.0.1:8080"
	DefaultPreviewAddr     = "127.0.0.1:8081"
	DefaultPreviewPort     = 8081
	DefaultEngineListen    = "127.0.0.1:4222"
	DefaultSMTPAddr        = intake.DefaultAddr
	DefaultMailDomain      = "edit.localhost"
	DefaultMailLocal       = "edit"
	DefaultMailMaxBytes    = intake.DefaultMaxBytes
	DefaultRelayTLS        = "starttls"
	DefaultPerSender       = 30
	DefaultPerTenant       = 60
	DefaultPreviewDomain   = "localhost"
	DefaultProcessor       = ProcessorPipeline
	DefaultBuildTimeout    = 10 * time.Minute
	DefaultServeWorkers    = 4
	DefaultWorkerWorkers   = 1
	DefaultShutdownTimeout = 30 * time.Second
	DefaultAgentCommand    = `echo "$WO_INSTRUCTION" >> instructions.log && echo "recorded instruction for $WO_PROJECT/$WO_USER"`
	// DefaultSystemData is the data directory of the systemd unit in deploy/, and of root
	// when its home cannot be entered by the jobs' user.
	DefaultSystemData = "/var/lib/webordinary"
)

// Processors: what a job does.
const (
	ProcessorPipeline = "pipeline" // git, the project's agent, build, preview, push
	ProcessorCommand  = "command"  // Worker.AgentCommand in a per-tenant directory
	ProcessorNoop     = "noop"     // nothing (benchmarks)
)

// ChromiumOff as Worker.Chromium takes no pictures of the changes.
const ChromiumOff = "off"

// Config is one process's configuration, for either role. Validate fills the defaults and
// checks everything before anything binds a port or touches the disk.
type Config struct {
	// Role is RoleServe (default) or RoleWorker.
	Role Role
	// Data is the data directory: engine files, workspaces, state, previews, mail spools,
	// secrets. Default DefaultDataDir(). Made absolute by Validate.
	Data string
	// Engine is the backend's URL for broker.Open: embedded:///abs/dir, nats://host:4222
	// (several comma-separated) or any registered scheme. Serve's default is the embedded
	// engine in <Data>/nats; a worker must be given one.
	Engine string
	// EngineListen is where the embedded engine accepts other processes (port 0: any free
	// one); empty keeps it in-process only.
	EngineListen string
	// EngineUser and EnginePassword authenticate to the engine (both or neither). Default: the
	// embedded engine's generated ones in <Data>/secrets/nats.json (serve creates them; a
	// worker reads them when present and the URL carries none).
	EngineUser, EnginePassword string
	// NoSync relaxes the embedded engine's fsync per write.
	NoSync bool

	// HTTPAddr is the API and dashboard's address (serve). Default DefaultHTTPAddr.
	HTTPAddr string
	// PublicURL is the dashboard's address as people reach it; its host is the only
	// non-loopback Host the HTTP server answers to besides HTTPAddr's. Default http://<bound HTTPAddr>.
	PublicURL string
	// Token guards the dashboard and API. Default: generated once into <Data>/secrets/api-token.
	Token string
	// PreviewAddr is the preview server's address; empty serves no previews.
	PreviewAddr string
	// ReadyFile, when set, receives {"api":URL,"smtp":addr,"nats":URL,"preview":addr} once serving.
	ReadyFile string
	// ReconcileEvery is the router reconciler's period. Default router.DefaultReconcileEvery.
	ReconcileEvery time.Duration
	// InterruptPolicy is what a new instruction on a thread does to that thread's running job,
	// for projects that set no policy of their own (project.Project.InterruptPolicy); an
	// instruction on another thread always waits. Default interrupt.
	InterruptPolicy router.Policy
	// ShutdownTimeout bounds the whole shutdown (after which Run returns anyway). Default
	// DefaultShutdownTimeout, and at least Worker.ShutdownGrace plus 5s.
	ShutdownTimeout time.Duration

	// Mail configures mail in and out (serve).
	Mail Mail
	// AWS locates the AWS services of Worker.PreviewTarget, Mail.SES and Mail.SESQueue.
	AWS AWS
	// Worker configures this process's workers.
	Worker Worker

	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
	// Banner, when set, receives the human summary printed once serving.
	Banner io.Writer
}

// DataUsage describes the data directory (the data key and --data).
const DataUsage = "data directory: engine files, workspaces, state, previews, secrets; a worker also reads secrets/nats.json (serve's engine credentials) there (default $XDG_DATA_HOME/webordinary, else ~/.local/share/webordinary; as root when the jobs' user cannot enter that, " + DefaultSystemData + ")"

// Keys registers every key of c on s at its default: the top level, [engine], [serve] and
// the sections of Mail, AWS and Worker. Serve and worker read the same keys (one file may
// serve both; a worker ignores [serve] and [mail]); c.Role picks each command's flags and
// defaults. A new setting is a field with one line here or in its section's keys method.
func (c *Config) Keys(s *conf.Set) {
	top := s.Section("")
	top.String(&c.Data, "data", "", DataUsage).Flag("data")
	c.serveFlag(top.String(&c.ReadyFile, "ready_file", "", `serve: when ready, write {"api":URL,"nats":URL} to this file (for scripts and supervisors)`), "ready-file")
	top.Duration(&c.ShutdownTimeout, "shutdown_timeout", DefaultShutdownTimeout, "bound on the whole shutdown (at least worker.shutdown_grace + 5s)").Was("shutdown-timeout")
	c.engineKeys(s.Section("engine"))
	c.serveKeys(s.Section("serve"))
	c.Worker.keys(s.Section("worker"), c.Role)
	c.Worker.sandboxKeys(s.Section("sandbox"), c.Role)
	c.Mail.keys(s.Section("mail"), c.serveDefault(DefaultSMTPAddr), c.serveFlag)
	c.AWS.keys(s.Section("aws"))
}

func (c *Config) engineKeys(s *conf.Section) {
	s.String(&c.Engine, "url", "", "the engine's URL: embedded:///abs/dir (serve: an engine in this process; default embedded://<data>/nats), nats://host:4222[,nats://host2:4222] (a NATS server or cluster; a worker: a serve's --nats-listen) or aws://?region=R&prefix=P (SQS, DynamoDB and S3)").Flag("engine")
	c.serveFlag(s.String(&c.EngineListen, "listen", c.serveDefault(DefaultEngineListen), "serve: where the embedded engine accepts other worker processes; empty = in-process only"), "nats-listen")
	s.String(&c.EngineUser, "user", "", "engine user (serve's default: generated once into <data>/secrets/nats.json for the embedded engine; a worker's: the URL's, else that file when present)").Was("nats-user")
	s.String(&c.EnginePassword, "password", "", "engine password (with user)").Was("nats-password")
	s.Bool(&c.NoSync, "no_sync", false, "do not fsync every write of the embedded engine (faster; a power loss may lose the last accepted jobs)").Was("no-sync")
}

func (c *Config) serveKeys(s *conf.Section) {
	c.serveFlag(s.String(&c.HTTPAddr, "http", c.serveDefault(DefaultHTTPAddr), "HTTP API and dashboard address"), "http")
	c.serveFlag(s.String(&c.PreviewAddr, "preview", c.serveDefault(DefaultPreviewAddr), "preview server address (http://edit.<project>.localhost:<port>/); empty = none"), "preview")
	s.String(&c.PublicURL, "public_url", "", "the dashboard's address as people reach it, for the signed publish links in replies; its host is the only non-loopback Host name the dashboard and API answer to (default http://<http>)").Was("public-url")
	s.String(&c.Token, "dashboard_token", "", "token required by the dashboard and API (default: generated once into <data>/secrets/api-token)").Was("dashboard-token")
	s.Duration(&c.ReconcileEvery, "reconcile", router.DefaultReconcileEvery, "reconciler period").Was("reconcile")
	s.String((*string)(&c.InterruptPolicy), "interrupt_policy", string(router.PolicyInterrupt), "what a new instruction on a thread does to that thread's running job, for projects that do not set their own: interrupt or queue (another thread's instruction always waits)").Was("interrupt-policy")
}

// serveDefault is def for serve and empty for a worker, which listens on nothing.
func (c *Config) serveDefault(def string) string {
	if c.Role == RoleWorker {
		return ""
	}
	return def
}

// serveFlag makes k a flag of serve; a worker reads the key from the same variable but has
// no such flag.
func (c *Config) serveFlag(k *conf.Key, flag string) {
	if c.Role == RoleWorker {
		k.WithEnv(conf.EnvName(flag))
		return
	}
	k.Flag(flag)
}

// FieldKey is the key that sets the Config field at path (as in FieldError.Field, e.g.
// "Worker.LeaseTTL"), or nil; s is the Set c's keys were registered on.
func (c *Config) FieldKey(s *conf.Set, path string) *conf.Key {
	v := reflect.ValueOf(c).Elem()
	for _, name := range strings.Split(path, ".") {
		if v.Kind() != reflect.Struct {
			return nil
		}
		if v = v.FieldByName(name); !v.IsValid() {
			return nil
		}
	}
	return s.ByPointer(v.Addr().Interface())
}

// Mail configures serve's mail.
type Mail struct {
	// SMTPAddr is the SMTP listener's address; empty runs none (replies are still sent).
	SMTPAddr string
	// Domains we receive mail for; the first is used in our addresses. Default DefaultMailDomain.
	Domains []string
	// Local is our address's local part. Default DefaultMailLocal.
	Local string
	// Secret signs reply tokens. Default: generated once and kept in the engine, so every
	// serve on it, restarted or new, opens the tokens any of them handed out.
	Secret string
	// TrustedAuthServ: trust only Authentication-Results with this authserv-id (behind a relay),
	// and only on mail from TrustedRelays.
	TrustedAuthServ string
	// TrustedRelays are the addresses (IPs, CIDRs; an item may be a comma-separated list) the
	// relay connects from; required with TrustedAuthServ. Any other client's mail is verified
	// as if straight from the internet, whatever Authentication-Results it carries.
	TrustedRelays []string
	// DNSFixture is a JSON file of DNS records used instead of DNS for sender checks.
	DNSFixture string
	// TLSCert and TLSKey offer STARTTLS (both or neither).
	TLSCert, TLSKey string
	// MaxBytes bounds a message. Default DefaultMailMaxBytes.
	MaxBytes int64
	// Relay is the host:port replies go through; empty writes .eml files into <Data>/outbox.
	Relay string
	// RelayUser and RelayPassword authenticate to Relay.
	RelayUser, RelayPassword string
	// RelayTLS is starttls (default), opportunistic, tls or none.
	RelayTLS string
	// PerSender and PerTenant are instructions per hour. Defaults DefaultPerSender, DefaultPerTenant.
	// Mail over a limit is held (listed, released or dropped by an operator), never dropped.
	PerSender, PerTenant int
	// HeldNoticeAfter: a sender whose mail was held gets one notice per limit window listing
	// it, once none of theirs was held for this long. Default inbound.DefaultHeldNoticeAfter.
	HeldNoticeAfter time.Duration
	// Parse bounds parsing one message. Zero fields take message's defaults.
	Parse message.Limits
	// SES sends replies through Amazon SES v2 (AWS) instead of Relay or the outbox directory.
	// SES gives each message its own Message-ID; it is recorded per reply, so an owner's
	// In-Reply-To still finds the thread.
	SES bool
	// SESConfigurationSet, with SES, is named on every send (bounce and complaint events).
	SESConfigurationSet string
	// SESQueue is the URL of the SQS queue SES's receipt rule notifies (through SNS) of mail it
	// stored in S3: serve takes mail from there instead of an SMTP listener (SMTPAddr must be
	// empty) and trusts only SES's own Authentication-Results (TrustedAuthServ amazonses.com).
	SESQueue string
	// SESPollWait is the long-poll wait on SESQueue, 1–20 s. Default 20s.
	SESPollWait time.Duration
	// LocalTesting accepts mail signed with the data directory's local key as authenticated
	// (`webordinary mail send`); SMTPAddr must be loopback. See LocalDKIMFile.
	LocalTesting bool
}

// keys registers m's keys on s; smtp is the listener's default, flag marks the key that is
// also a serve flag.
func (m *Mail) keys(s *conf.Section, smtp string, flag func(*conf.Key, string)) {
	flag(s.String(&m.SMTPAddr, "smtp", smtp, "SMTP listener for instructions by email; empty = no mail"), "smtp")
	s.List(&m.Domains, "domains", []string{DefaultMailDomain}, "domains we receive mail for; the first is used in our addresses").Was("mail-domain")
	s.String(&m.Local, "local", DefaultMailLocal, "local part of our address (edit@<domain>)").Was("mail-local")
	s.String(&m.Secret, "secret", "", "secret that signs reply tokens (default: generated once and kept in the engine)").Was("mail-secret")
	s.String(&m.TrustedAuthServ, "trusted_authserv", "", "behind a relay (Postfix, a filter): trust only its Authentication-Results with this authserv-id, and only on mail from trusted_relays").Was("mail-trusted-authserv")
	s.List(&m.TrustedRelays, "trusted_relays", nil, "with trusted_authserv (required): IPs or CIDRs the relay connects from; any other client's mail is checked as if straight from the internet").Was("mail-trusted-relay")
	s.String(&m.DNSFixture, "dns_fixture", "", "JSON file of DNS records used instead of real DNS for sender checks (tests, offline demos)").Was("mail-dns-fixture")
	s.String(&m.TLSCert, "smtp_tls_cert", "", "certificate file: offer STARTTLS").Was("smtp-tls-cert")
	s.String(&m.TLSKey, "smtp_tls_key", "", "key file for smtp_tls_cert").Was("smtp-tls-key")
	s.Int64(&m.MaxBytes, "smtp_max_bytes", DefaultMailMaxBytes, "largest message accepted").Was("smtp-max-bytes")
	s.String(&m.Relay, "relay", "", "host:port of the SMTP relay replies go through (default: .eml files in <data>/outbox)").Was("smtp-relay")
	s.String(&m.RelayUser, "relay_user", "", "relay user").Was("smtp-relay-user")
	s.String(&m.RelayPassword, "relay_password", "", "relay password").Was("smtp-relay-password")
	s.String(&m.RelayTLS, "relay_tls", DefaultRelayTLS, "relay TLS: starttls, opportunistic, tls or none").Was("smtp-relay-tls")
	s.Int(&m.PerSender, "per_sender", DefaultPerSender, "instructions per sender per hour; more are held for the operator (webordinary mail held), never dropped").Was("mail-per-sender")
	s.Int(&m.PerTenant, "per_tenant", DefaultPerTenant, "instructions per project+user per hour").Was("mail-per-tenant")
	s.Duration(&m.HeldNoticeAfter, "held_notice_after", inbound.DefaultHeldNoticeAfter, "a sender whose mail was held gets one notice per hour listing it, once none of theirs was held for this long").Was("mail-held-notice-after")
	m.Parse.Keys(s)
	s.Bool(&m.LocalTesting, "local_testing", false, "local testing: accept mail from `webordinary mail send` on this machine as authenticated; needs smtp on loopback; no real DNS for sender checks").Was("mail-local-testing")
	s.Bool(&m.SES, "ses", false, "send replies through Amazon SES v2 (see [aws]) instead of a relay or <data>/outbox").Was("mail-ses")
	s.String(&m.SESConfigurationSet, "ses_configuration_set", "", "with ses: SES configuration set named on every send").Was("mail-ses-configuration-set")
	s.Duration(&m.SESPollWait, "ses_poll_wait", 0, "the long-poll wait on ses_queue, 1s to 20s (default 20s)")
	s.String(&m.SESQueue, "ses_queue", "", "take mail from SES: URL of the SQS queue its receipt rule notifies (S3 + SNS); needs an empty smtp; trusts only SES's Authentication-Results").Was("mail-ses-queue")
}

// Worker configures a process's workers (both roles).
type Worker struct {
	// Count is how many tenants this process serves at once. Serve: 0 runs none (router and
	// API only). Worker role: at least 1; default DefaultWorkerWorkers.
	Count int
	// Processor is ProcessorPipeline (default), ProcessorCommand or ProcessorNoop.
	Processor string
	// AgentCommand is ProcessorCommand's shell command. Default DefaultAgentCommand.
	AgentCommand string
	// Workspaces, State and Previews are the roots of per-tenant working copies, agent and
	// build state, and deployed previews. Defaults <Data>/workspaces, <Data>/state,
	// <Data>/previews. Made absolute by Validate. Previews PreviewsEngine ("engine") deploys
	// into the engine instead, and serve serves from there: no directory shared with serve.
	Workspaces, State, Previews string
	// PreviewPort is the preview server's port in reported links when this process serves
	// none (serve reports its own). Default DefaultPreviewPort.
	PreviewPort int
	// PreviewDomain is the preview host suffix: edit.<project>.<domain>. Default DefaultPreviewDomain.
	PreviewDomain string
	// BuildTimeout bounds a site's install and build. Default DefaultBuildTimeout.
	BuildTimeout time.Duration
	// ClaudeLogin is a Claude Code config directory where `claude /login` was run (e.g.
	// ~/.claude): every claude agent gets a read-only copy of its access token (never the
	// refresh token, nothing else) in its own config (pipeline.Config.ClaudeLogin). Empty:
	// agents use ANTHROPIC_API_KEY or their own login.
	ClaudeLogin string
	// AgentBaseURL is the model API endpoint (a gateway or proxy) every project's agent talks
	// to unless the project sets its own (pipeline.Config.AgentBaseURL). Empty: the vendors'.
	AgentBaseURL string
	// ModelRetryBudget bounds how long a job waits for a model service that turned its agent
	// away (rate limited, overloaded, unreachable) before it fails and the owner is told the
	// service was unavailable (pipeline.Config.ModelRetryBudget). Default
	// pipeline.DefaultModelRetryBudget; negative: no retries.
	ModelRetryBudget time.Duration
	// LeaseTTL, IdleRelease, Quantum, MaxAttempts and ShutdownGrace are worker.Config's;
	// zero takes worker's defaults.
	LeaseTTL, IdleRelease, Quantum time.Duration
	MaxAttempts                    int
	ShutdownGrace                  time.Duration
	// WarmFor is worker.Config's: how long a released tenant's next claim goes first to this
	// process (warm workspace). Zero takes worker.DefaultWarmFor; negative: off.
	WarmFor time.Duration
	// IdleExit ends a worker process (exit status 0) once all its workers found nothing to
	// do for this long, for scale-to-zero. 0: never. RoleWorker only.
	IdleExit time.Duration
	// Sandbox is how jobs' processes run: auto (default), required or off.
	Sandbox sandbox.Mode
	// SandboxUID and SandboxGID are the job identity when running as root. Default sandbox's.
	SandboxUID, SandboxGID int
	// SandboxReadOnly are extra host paths jobs see read-only.
	SandboxReadOnly []string
	// JobLimits bound every sandboxed job ("mem=2GiB,procs=256,cpu=10m,disk=2GiB,tmp=512MiB",
	// sandbox.ParseLimits); unset limits take sandbox.DefaultLimits, and a project's own
	// limits override them. --sandbox off drops them.
	JobLimits string
	// EgressAllow are hosts every sandboxed job may reach through the egress proxy besides
	// the npm registry, the git host of its project's remote and the model APIs: "host"
	// (ports 80 and 443), "host:port", "*.domain", or "*" (any public host). Jobs never reach
	// loopback or private addresses (pipeline.Config.EgressAllow).
	EgressAllow []string
	// JobEnv are variables every job gets: NAME or NAME=VALUE (jobenv.Parse).
	JobEnv []string
	// PreviewTarget is where previews are deployed: empty for Previews (a directory or the
	// engine), or s3://bucket[/prefix] for S3 (AWS; serve's preview server then reads the same
	// bucket, live sites included, and every worker deploys there: no shared directory
	// needed). It and Previews PreviewsEngine are alternatives; Validate refuses both.
	PreviewTarget string
	// Shots is where the pictures of each job's change go, read by serve for replies and job
	// pages; shared like Previews, unless previews live in the engine or S3 (pictures then
	// travel through the engine's blob store "shots"). Default <Data>/shots.
	Shots string
	// Packages is the package cache all tenants' installs share (see build.Packages): filled
	// by the platform, copied into a new site's npm cache so that its first install does not
	// download what another site already did. Default <Data>/packages; "off" shares nothing.
	Packages string
	// Chromium is the headless browser that takes them: "" finds the system's, "off" takes
	// none.
	Chromium string
	// ShotPages is how many pages are pictured per job. Default shots.DefaultPages.
	ShotPages int
	// ShotBudget bounds one picture. Default shots.DefaultPageBudget.
	ShotBudget time.Duration
	// StateMaxBytes bounds the archive of a tenant's agent state (its agent/ and home/ under
	// State) that the pipeline saves to the engine's blob stores (with aws://, S3 objects in
	// the payload bucket) after each job and restores on another
	// machine, so any worker can take a thread's session over. 0 takes
	// agentstate.DefaultMaxBytes; at most broker.MaxBlobSize. Negative: agent state stays on
	// the machine that wrote it, and every worker must share State.
	StateMaxBytes int
	// PreviewCacheMaxBytes bounds <Data>/preview-cache, where a process keeps the preview
	// files it read from the engine (Previews PreviewsEngine): past it, the least recently
	// used go (fetched again when asked for). 0 takes preview.DefaultCacheMax (1 GiB).
	PreviewCacheMaxBytes int64
}

// keys registers w's keys on s (the worker section); role picks the default count.
func (w *Worker) keys(s *conf.Section, role Role) {
	count := DefaultServeWorkers
	if role == RoleWorker {
		count = DefaultWorkerWorkers
	}
	s.Int(&w.Count, "count", count, fmt.Sprintf("how many tenants this process serves at once (serve: default %d, 0 = router and API only; worker: default %d)", DefaultServeWorkers, DefaultWorkerWorkers)).Flag("workers")
	s.String(&w.Processor, "processor", DefaultProcessor, "what a job does: pipeline (git, the project's agent, build, preview, push), command (run agent_command in a per-tenant directory), or noop (benchmarks)").Was("processor")
	s.String(&w.AgentCommand, "agent_command", DefaultAgentCommand, "with processor command: shell command run per job in the tenant's directory; instruction on stdin and in WO_INSTRUCTION").Was("agent-command")
	s.String(&w.Workspaces, "workspaces", "", "root of per-tenant working copies; the same path on every worker (default <data>/workspaces)").Was("workspaces")
	s.String(&w.State, "state", "", "root of per-tenant agent and build state (default <data>/state)").Was("state")
	s.String(&w.Previews, "previews", "", `directory previews are deployed into, shared with the preview server (default <data>/previews); "engine": into the engine, served by any serve from there (no shared directory); see also preview_target`).Was("previews")
	s.String(&w.PreviewTarget, "preview_target", "", "deploy previews to S3 instead: s3://bucket[/prefix] (serve's preview server reads the same bucket; see [aws])").Was("preview-target")
	s.Int(&w.PreviewPort, "preview_port", DefaultPreviewPort, "preview server port, for the links in results (serve: its own preview port)").Was("preview-port")
	s.String(&w.PreviewDomain, "preview_domain", DefaultPreviewDomain, "preview host suffix: edit.<project>.<domain>").Was("preview-domain")
	s.Int64(&w.PreviewCacheMaxBytes, "preview_cache_max_bytes", preview.DefaultCacheMax, "with previews = \"engine\": bound of <data>/preview-cache, the preview files this process read from the engine (least recently used go first)").Was("preview-cache-max-bytes")
	s.Duration(&w.BuildTimeout, "build_timeout", DefaultBuildTimeout, "bound on a site's install and build").Was("build-timeout")
	s.String(&w.ClaudeLogin, "claude_login", "", "share the Claude Code subscription login in this config directory (where `claude /login` was run, e.g. ~/.claude) with every claude agent: a read-only copy of its access token, never the refresh token or any other secret").Was("claude-login")
	s.String(&w.AgentBaseURL, "agent_base_url", "", "model API endpoint (gateway or proxy) every project's agent talks to unless the project sets its own: claude gets ANTHROPIC_BASE_URL, codex its model provider's base_url (-c), opencode its model provider's baseURL; default: the vendors'").Was("agent-base-url")
	s.Duration(&w.ModelRetryBudget, "model_retry_budget", pipeline.DefaultModelRetryBudget, "how long a job waits for a model service that turned its agent away (HTTP 429/529, overloaded, unreachable; its retry-after is honoured) before it fails and the owner is told; negative: no retries").Was("model-retry-budget")
	s.List(&w.JobEnv, "job_env", nil, "variables every job's agent and build get: NAME (the value from this process's environment) or NAME=VALUE (WO_* refused)").Was("job-env")
	w.scheduleKeys(s)
	w.shotKeys(s)
	s.Int(&w.StateMaxBytes, "state_max_bytes", agentstate.DefaultMaxBytes, "largest archive of a tenant's agent state (sessions) saved to the engine after each job, so any worker resumes the thread; -1 keeps it on this machine (then state must be shared)").Was("state-max-bytes")
}

// scheduleKeys registers the keys of worker.Config's scheduling.
func (w *Worker) scheduleKeys(s *conf.Section) {
	s.Duration(&w.LeaseTTL, "lease_ttl", worker.DefaultLeaseTTL, "tenant lease time to live; a crashed worker's tenants move after about this long").Was("lease-ttl")
	s.Duration(&w.IdleRelease, "idle_release", worker.DefaultIdleRelease, "release a tenant after this long without jobs").Was("idle-release")
	s.Duration(&w.Quantum, "quantum", worker.DefaultQuantum, "keep a busy tenant at most this long while other tenants wait for a worker").Was("quantum")
	s.Duration(&w.WarmFor, "warm_for", worker.DefaultWarmFor, "a released tenant's next claim goes first to this process (warm workspace) for this long, then to any; negative: off").Was("warm-for")
	s.Int(&w.MaxAttempts, "max_attempts", worker.DefaultMaxAttempts, "dead-letter a job after this many failed runs").Was("max-attempts")
	s.Duration(&w.ShutdownGrace, "shutdown_grace", worker.DefaultShutdownGrace, "on shutdown, let a running job finish this long before handing it back").Was("shutdown-grace")
	s.Duration(&w.IdleExit, "idle_exit", 0, "worker only: exit (status 0) once every worker found nothing to do for this long, so the platform's scaler can scale to zero; 0 = never").Was("idle-exit")
}

// shotKeys registers the keys of the pictures of each job's change.
func (w *Worker) shotKeys(s *conf.Section) {
	s.String(&w.Shots, "shots", "", "directory for the pictures of each job's change; each machine's own with previews in the engine or S3 (they travel through the engine), else shared by workers and serve like previews (default <data>/shots)").Was("shots")
	s.String(&w.Packages, "packages", "", `directory of the package cache all sites' installs share: a new site whose lockfile another site used installs from it (filled by the platform, copied into a new site's npm cache; no job writes it); "off" shares nothing (default <data>/packages)`)
	s.String(&w.Chromium, "chromium", "", `headless Chromium for the pictures (default: the system's chromium); "off": no pictures`).Was("chromium")
	s.Int(&w.ShotPages, "shot_pages", shots.DefaultPages, "pages pictured per job, most relevant first").Was("shot-pages")
	s.Duration(&w.ShotBudget, "shot_budget", shots.DefaultPageBudget, "time budget of one picture; a page that takes longer gets none").Was("shot-budget")
}

// sandboxKeys registers the keys of the sandbox jobs run in on s (the sandbox section).
func (w *Worker) sandboxKeys(s *conf.Section, _ Role) {
	s.String((*string)(&w.Sandbox), "mode", string(sandbox.ModeAuto), "run every job (agent, install, build) in a bubblewrap sandbox: auto (sandbox when bwrap works, else warn), required, or off").Flag("sandbox")
	s.Int(&w.SandboxUID, "uid", sandbox.DefaultUID, "when running as root: the unprivileged uid jobs run as").Was("sandbox-uid")
	s.Int(&w.SandboxGID, "gid", sandbox.DefaultGID, "when running as root: the gid jobs run as").Was("sandbox-gid")
	s.List(&w.SandboxReadOnly, "read_only", nil, "extra host paths jobs see read-only, e.g. a toolchain outside /usr, /opt and PATH").Was("sandbox-ro")
	s.String(&w.JobLimits, "job_limits", "", "bound every sandboxed job: any of mem=2GiB (the job's processes together with cgroups, else per process), procs=256, cpu=10m (default: none beyond the timeouts), disk=2GiB (workspace+state+home, checked after each process), tmp=512MiB (/tmp); unset ones take these defaults, \"off\" lifts one; a project's own --job-limits win").Was("job-limits")
	s.List(&w.EgressAllow, "egress_allow", nil, "HOST, HOST:PORT, *.DOMAIN or * (any public host) every sandboxed job may reach besides the npm registry, its remote's git host and the model APIs").Was("egress-allow")
}

// FieldError is a Config field that cannot be used. Field is the path from Config, such as
// "Worker.Count" or "Mail.Relay"; callers (the CLI) may name their own flag for it.
type FieldError struct {
	Field string
	Value any
	Err   error
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s %s: %v", e.Field, quoteValue(e.Value), e.Err)
}

func (e *FieldError) Unwrap() error { return e.Err }

func quoteValue(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v)
}

func fieldErr(field string, value any, format string, args ...any) error {
	return &FieldError{Field: field, Value: value, Err: fmt.Errorf(format, args...)}
}

// DefaultDataDir is the per-user data directory: $XDG_DATA_HOME/webordinary, else
// ~/.local/share/webordinary. For root whose home the jobs' default user cannot enter (/root,
// mode 0700), it is DefaultSystemData, as the systemd unit in deploy/ uses. Serve, worker and
// the CLI agree on it, so the CLI finds serve's token.
func DefaultDataDir() (string, error) {
	d, err := userDataDir()
	if err != nil {
		return "", err
	}
	if os.Geteuid() == 0 && sandbox.Reachable(d, sandbox.DefaultUID, sandbox.DefaultGID) != nil {
		return DefaultSystemData, nil
	}
	return d, nil
}

func userDataDir() (string, error) {
	if x := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "webordinary"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil || !filepath.IsAbs(home) {
		return "", fmt.Errorf("no data directory: set XDG_DATA_HOME or HOME, or give one (%v)", err)
	}
	return filepath.Join(home, ".local", "share", "webordinary"), nil
}

// Validate fills c's defaults, makes its paths absolute and checks every field. It binds
// nothing and writes nothing; errors are *FieldError naming the field.
func (c *Config) Validate() error {
	steps := []func() error{c.validateRole, c.validateData, c.validateEngine, c.validateHTTP,
		c.validateRouter, c.Mail.validate, c.Mail.validateSES, c.Mail.validateTrustedRelays, c.Worker.validate, c.AWS.validate}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Worker.absolute(c.Data)
	if c.Role == RoleWorker && c.Worker.Count == 0 {
		c.Worker.Count = DefaultWorkerWorkers
	}
	if min := c.Worker.ShutdownGrace + 5*time.Second; c.ShutdownTimeout < min {
		c.ShutdownTimeout = max(min, DefaultShutdownTimeout)
	}
	return nil
}

func (c *Config) validateRole() error {
	switch c.Role {
	case "":
		c.Role = RoleServe
	case RoleServe, RoleWorker:
	default:
		return fieldErr("Role", c.Role, "use %s or %s", RoleServe, RoleWorker)
	}
	if c.Role != RoleWorker && c.Worker.IdleExit != 0 {
		return fieldErr("Worker.IdleExit", c.Worker.IdleExit, "only a worker process exits when idle (serve also routes and serves the API)")
	}
	return nil
}

func (c *Config) validateData() error {
	if c.Data == "" {
		d, err := DefaultDataDir()
		if err != nil {
			return &FieldError{Field: "Data", Value: "", Err: err}
		}
		c.Data = d
	}
	abs, err := filepath.Abs(c.Data)
	if err != nil {
		return &FieldError{Field: "Data", Value: c.Data, Err: err}
	}
	c.Data = abs
	return nil
}

func (c *Config) validateEngine() error {
	if c.EngineUser == "" != (c.EnginePassword == "") {
		return fieldErr("EngineUser", c.EngineUser, "set both EngineUser and EnginePassword, or neither (serve then generates them into %s)", SecretPath(c.Data, EngineCredsFile))
	}
	if c.Engine == "" && c.Role == RoleWorker {
		return fieldErr("Engine", "", "a worker needs the engine's URL: a serve's EngineListen address (nats://host:4222) or a NATS cluster")
	}
	if c.Engine == "" {
		c.Engine = natsjs.EmbeddedURL(filepath.Join(c.Data, "nats"))
	}
	scheme, _, ok := strings.Cut(c.Engine, "://")
	if !ok || scheme == "" {
		return fieldErr("Engine", c.Engine, "want a URL such as nats://host:4222 or embedded:///abs/dir")
	}
	if natsjs.EmbeddedCluster(c.Engine) && c.EngineUser == "" {
		return fieldErr("EngineUser", "", "an embedded engine in a cluster needs the same user and password on every member (they authenticate one another): set EngineUser and EnginePassword (WO_NATS_USER, WO_NATS_PASSWORD)")
	}
	if c.EngineListen != "" {
		if c.Role == RoleWorker || !c.embedded() {
			return fieldErr("EngineListen", c.EngineListen, "only an embedded engine listens (this process's engine is %s)", c.Engine)
		}
		return checkAddr("EngineListen", c.EngineListen)
	}
	return nil
}

// embedded reports whether c.Engine is an engine in this process (whose credentials serve
// generates).
func (c *Config) embedded() bool { return strings.HasPrefix(c.Engine, natsjs.SchemeEmbedded+"://") }

func (c *Config) validateHTTP() error {
	if c.Role == RoleWorker {
		return nil
	}
	if c.HTTPAddr == "" {
		c.HTTPAddr = DefaultHTTPAddr
	}
	if err := checkAddr("HTTPAddr", c.HTTPAddr); err != nil {
		return err
	}
	if c.PreviewAddr != "" {
		if err := checkAddr("PreviewAddr", c.PreviewAddr); err != nil {
			return err
		}
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || u.Hostname() == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return fieldErr("PublicURL", c.PublicURL, "want an absolute URL such as https://edit.example.com")
		}
	}
	if c.ReadyFile != "" {
		abs, err := filepath.Abs(c.ReadyFile)
		if err != nil {
			return &FieldError{Field: "ReadyFile", Value: c.ReadyFile, Err: err}
		}
		c.ReadyFile = abs
	}
	return nil
}

func (c *Config) validateRouter() error {
	switch c.InterruptPolicy {
	case "":
		c.InterruptPolicy = router.PolicyInterrupt
	case router.PolicyInterrupt, router.PolicyQueue:
	default:
		return fieldErr("InterruptPolicy", c.InterruptPolicy, "use %s or %s", router.PolicyInterrupt, router.PolicyQueue)
	}
	if c.ReconcileEvery < 0 {
		return fieldErr("ReconcileEvery", c.ReconcileEvery, "must not be negative")
	}
	if c.ReconcileEvery == 0 {
		c.ReconcileEvery = router.DefaultReconcileEvery
	}
	return nil
}

// checkAddr checks a host:port without binding it.
func checkAddr(field, addr string) error {
	if _, port, err := net.SplitHostPort(addr); err != nil {
		return fieldErr(field, addr, "use host:port, e.g. 127.0.0.1:8080")
	} else if _, err := net.LookupPort("tcp", port); err != nil {
		return fieldErr(field, addr, "bad port %q", port)
	}
	return nil
}

func (m *Mail) validate() error {
	if m.SMTPAddr != "" {
		if err := checkAddr("Mail.SMTPAddr", m.SMTPAddr); err != nil {
			return err
		}
	}
	m.Domains = splitItems(m.Domains)
	if len(m.Domains) == 0 {
		m.Domains = []string{DefaultMailDomain}
	}
	m.Local = cmp.Or(m.Local, DefaultMailLocal)
	m.RelayTLS = cmp.Or(m.RelayTLS, DefaultRelayTLS)
	if m.MaxBytes == 0 {
		m.MaxBytes = DefaultMailMaxBytes
	}
	if m.PerSender == 0 {
		m.PerSender = DefaultPerSender
	}
	if m.PerTenant == 0 {
		m.PerTenant = DefaultPerTenant
	}
	if m.HeldNoticeAfter == 0 {
		m.HeldNoticeAfter = inbound.DefaultHeldNoticeAfter
	}
	if m.HeldNoticeAfter < 0 {
		return fieldErr("Mail.HeldNoticeAfter", m.HeldNoticeAfter, "must not be negative")
	}
	if (m.TLSCert == "") != (m.TLSKey == "") {
		return fieldErr("Mail.TLSCert", m.TLSCert, "set both Mail.TLSCert and Mail.TLSKey, or neither")
	}
	if m.Relay != "" {
		if _, _, err := net.SplitHostPort(m.Relay); err != nil {
			return fieldErr("Mail.Relay", m.Relay, "use host:port")
		}
	}
	switch m.RelayTLS {
	case "starttls", "opportunistic", "tls", "none":
	default:
		return fieldErr("Mail.RelayTLS", m.RelayTLS, "use starttls, opportunistic, tls or none")
	}
	if m.Secret != "" && len(m.Secret) < 16 {
		return fieldErr("Mail.Secret", "…", "must be at least 16 characters")
	}
	return m.validateLocalTesting()
}

// validateSES checks mail through SES: in from SESQueue (no SMTP listener beside it: its
// senders could write SES's header themselves), out with SES instead of a relay.
func (m *Mail) validateSES() error {
	if m.SES && m.Relay != "" {
		return fieldErr("Mail.SES", true, "replies go through SES or through Mail.Relay %q, not both", m.Relay)
	}
	if m.SESConfigurationSet != "" && !m.SES {
		return fieldErr("Mail.SESConfigurationSet", m.SESConfigurationSet, "is used only with Mail.SES")
	}
	if m.SESQueue == "" {
		return nil
	}
	if u, err := url.Parse(m.SESQueue); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fieldErr("Mail.SESQueue", m.SESQueue, "want the queue's URL, e.g. https://sqs.eu-west-1.amazonaws.com/123456789012/wo-inbound")
	}
	if m.SMTPAddr != "" {
		return fieldErr("Mail.SMTPAddr", m.SMTPAddr, "must be empty with Mail.SESQueue: mail comes from SES, and a direct SMTP sender could forge SES's Authentication-Results")
	}
	if m.LocalTesting {
		return fieldErr("Mail.LocalTesting", true, "cannot be combined with Mail.SESQueue")
	}
	switch m.TrustedAuthServ {
	case "":
		m.TrustedAuthServ = sesin.AuthServID
	case sesin.AuthServID:
	default:
		return fieldErr("Mail.TrustedAuthServ", m.TrustedAuthServ, "must be %s (or empty) with Mail.SESQueue: only SES's own header is trusted", sesin.AuthServID)
	}
	if m.SESPollWait != 0 && (m.SESPollWait < time.Second || m.SESPollWait > 20*time.Second) {
		return fieldErr("Mail.SESPollWait", m.SESPollWait, "must be between 1s and 20s")
	}
	return nil
}

func (w *Worker) validate() error {
	switch w.Processor {
	case "":
		w.Processor = DefaultProcessor
	case ProcessorPipeline, ProcessorCommand, ProcessorNoop:
	default:
		return fieldErr("Worker.Processor", w.Processor, "use %s, %s or %s", ProcessorPipeline, ProcessorCommand, ProcessorNoop)
	}
	switch w.Sandbox {
	case "":
		w.Sandbox = sandbox.ModeAuto
	case sandbox.ModeAuto, sandbox.ModeRequired, sandbox.ModeOff:
	default:
		return fieldErr("Worker.Sandbox", w.Sandbox, "use auto, required or off")
	}
	if _, err := sandbox.ParseLimits(w.JobLimits); err != nil {
		return &FieldError{Field: "Worker.JobLimits", Value: w.JobLimits, Err: err}
	}
	if w.PreviewTarget != "" {
		if w.Previews == PreviewsEngine {
			return fieldErr("Worker.PreviewTarget", w.PreviewTarget,
				"and Worker.Previews %q are alternatives: previews go to S3 or to the engine; leave one unset", PreviewsEngine)
		}
		if _, err := parseS3("Worker.PreviewTarget", w.PreviewTarget); err != nil {
			return err
		}
	}
	w.AgentCommand = cmp.Or(w.AgentCommand, DefaultAgentCommand)
	w.PreviewDomain = cmp.Or(w.PreviewDomain, DefaultPreviewDomain)
	if w.PreviewPort == 0 {
		w.PreviewPort = DefaultPreviewPort
	}
	if w.BuildTimeout == 0 {
		w.BuildTimeout = DefaultBuildTimeout
	}
	return w.validateNumbers()
}

func (w *Worker) validateNumbers() error {
	switch {
	case w.Count < 0:
		return fieldErr("Worker.Count", w.Count, "must not be negative")
	case w.PreviewPort < 0 || w.PreviewPort > 65535:
		return fieldErr("Worker.PreviewPort", w.PreviewPort, "must be a port, 1-65535")
	case w.LeaseTTL != 0 && w.LeaseTTL < worker.MinLeaseTTL:
		return fieldErr("Worker.LeaseTTL", w.LeaseTTL, "must be at least %s", worker.MinLeaseTTL)
	case w.MaxAttempts < 0:
		return fieldErr("Worker.MaxAttempts", w.MaxAttempts, "must not be negative")
	case w.ShotPages < 0:
		return fieldErr("Worker.ShotPages", w.ShotPages, "must not be negative")
	case w.PreviewCacheMaxBytes < 0:
		return fieldErr("Worker.PreviewCacheMaxBytes", w.PreviewCacheMaxBytes, "must not be negative (the default is %d, 1 GiB)", preview.DefaultCacheMax)
	case w.StateMaxBytes > broker.MaxBlobSize:
		return fieldErr("Worker.StateMaxBytes", w.StateMaxBytes, "must be at most %d (64 MiB)", broker.MaxBlobSize)
	case w.ClaudeLogin != "" && !isFile(filepath.Join(w.ClaudeLogin, ".credentials.json")):
		return fieldErr("Worker.ClaudeLogin", w.ClaudeLogin, "no .credentials.json there: run claude with CLAUDE_CONFIG_DIR=%s and /login first", w.ClaudeLogin)
	case w.AgentBaseURL != "" && !httpURL(w.AgentBaseURL):
		return fieldErr("Worker.AgentBaseURL", w.AgentBaseURL, "want http://host[:port][/path] or https://…")
	case w.BuildTimeout < 0 || w.IdleRelease < 0 || w.Quantum < 0 || w.ShutdownGrace < 0 || w.ShotBudget < 0:
		return fieldErr("Worker", "durations", "must not be negative")
	case w.IdleExit < 0:
		return fieldErr("Worker.IdleExit", w.IdleExit, "must not be negative (0: never exit)")
	}
	if w.ShutdownGrace == 0 {
		w.ShutdownGrace = worker.DefaultShutdownGrace
	}
	return nil
}

// absolute fills the worker directories from data and makes them absolute: jobs run in other
// directories, and the sandbox binds by absolute path.
func (w *Worker) absolute(data string) {
	for _, d := range []struct {
		p    *string
		name string
	}{{&w.Workspaces, "workspaces"}, {&w.State, "state"}, {&w.Previews, "previews"}, {&w.Shots, "shots"}, {&w.Packages, "packages"}} {
		if *d.p == "" {
			*d.p = filepath.Join(data, d.name)
		}
		if d.p == &w.Previews && *d.p == PreviewsEngine || d.p == &w.Packages && *d.p == PackagesOff {
			continue
		}
		if abs, err := filepath.Abs(*d.p); err == nil {
			*d.p = abs
		}
	}
}

// PackagesOff as Worker.Packages shares no package cache between tenants.
const PackagesOff = "off"

func (w Worker) sandboxIDs() (uid, gid int) {
	uid, gid = w.SandboxUID, w.SandboxGID
	if uid == 0 {
		uid = sandbox.DefaultUID
	}
	if gid == 0 {
		gid = sandbox.DefaultGID
	}
	return uid, gid
}

// httpURL reports whether s is an absolute http or https URL with a host.
func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// isFile reports whether path is a regular file this process can stat.
func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// splitItems splits items that are comma-separated lists themselves, dropping empty ones.
func splitItems(items []string) []string {
	var out []string
	for _, item := range items {
		for _, it := range strings.Split(item, ",") {
			if it = strings.TrimSpace(it); it != "" {
				out = append(out, it)
			}
		}
	}
	return out
}
