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
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/natsjs"
	"github.com/webordinary/webordinary/internal/mail/inbound"
	"github.com/webordinary/webordinary/internal/mail/intake"
	"github.com/webordinary/webordinary/internal/mail/message"
	"github.com/webordinary/webordinary/internal/mail/sesin"
	"github.com/webordinary/webordinary/internal/preview"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/sandbox"
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

// Mail configures serve's mail.
type Mail struct {
	// SMTPAddr is the SMTP listener's address; empty runs none (replies are still sent).
	SMTPAddr string
	// Domains we receive mail for; the first is used in our addresses. Default DefaultMailDomain.
	Domains []string
	// Local is our address's local part. Default DefaultMailLocal.
	Local string
	// Secret signs reply tokens. Default: generated once into <Data>/mail-secret.
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
