package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/emersion/go-msgauth/dkim"

	"github.com/webordinary/webordinary/internal/agent"
	"github.com/webordinary/webordinary/internal/api"
	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/demo"
	"github.com/webordinary/webordinary/internal/jobspec"
	jobreport "github.com/webordinary/webordinary/internal/pipeline/report"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/sandbox"
)

// demoFlags configure `webordinary demo`.
type demoFlags struct {
	data, httpAddr, previewAddr, smtpAddr, agent string
	exit                                         bool
}

const demoSender = "owner@bakery.example"

// defaultDemoData is the demo's data directory unless --data says otherwise.
const defaultDemoData = ".webordinary-demo"

func runDemo(ctx context.Context, args []string) error {
	var f demoFlags
	fs := newFlags("demo", "[flags]")
	fs.StringVar(&f.data, "data", defaultDemoData, "data directory for the demo (as root under a directory jobs cannot enter, such as /root: <tmp>/webordinary-demo)")
	fs.StringVar(&f.httpAddr, "http", "127.0.0.1:8080", "dashboard and API address")
	fs.StringVar(&f.previewAddr, "preview", "127.0.0.1:8081", "preview server address")
	fs.StringVar(&f.smtpAddr, "smtp", "127.0.0.1:2525", "SMTP address the sample email is sent to")
	fs.StringVar(&f.agent, "agent", "auto", "auto (Claude Code when its jobs can authenticate: ANTHROPIC_API_KEY, Bedrock, or an unexpired subscription login, which the demo shares read-only; else the demo agent), claude, or demo")
	fs.BoolVar(&f.exit, "exit", false, "stop once the reply is out (default: keep serving until Ctrl-C)")
	if err := parse(fs, args); err != nil {
		return err
	}
	return f.run(ctx)
}

func (f *demoFlags) run(ctx context.Context) error {
	data, err := filepath.Abs(f.data)
	if err != nil {
		return err
	}
	say := func(format string, a ...any) { fmt.Printf("demo: "+format+"\n", a...) }
	if f.data == defaultDemoData && os.Geteuid() == 0 && sandbox.Reachable(data, sandbox.DefaultUID, sandbox.DefaultGID) != nil {
		// As root under a directory the sandboxed jobs' user cannot enter (/root): a place it can.
		data = filepath.Join(os.TempDir(), "webordinary-demo")
	}
	say("starting webordinary in %s", data)
	key, dnsFile, err := demoDKIM(data)
	if err != nil {
		return err
	}
	spec, label, loginDir, err := f.chooseAgent(say)
	if err != nil {
		return err
	}
	ready := filepath.Join(data, "ready.json")
	_ = os.Remove(ready)
	args := []string{"--data", data, "--http", f.httpAddr, "--preview", f.previewAddr, "--smtp", f.smtpAddr,
		"--set", "mail.domains=edit.localhost", "--set", "mail.dns_fixture=" + dnsFile, "--nats-listen", "", "--workers", "2",
		"--log-level", "warn", "--ready-file", ready}
	if loginDir != "" {
		args = append(args, "--set", "worker.claude_login="+loginDir)
	}
	sf, err := parseServe(args)
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- sf.run(sctx) }()
	urls, err := awaitReady(ctx, ready, served)
	if err != nil {
		return err
	}
	say("serving: API and dashboard %s, SMTP %s", urls["api"], urls["smtp"])
	token, err := readAPIToken(data)
	if err != nil {
		return err
	}
	c := api.NewClient(urls["api"], token)
	if err := f.walkthrough(ctx, data, c, urls, key, spec, label, say); err != nil {
		return err
	}
	if f.exit {
		stop()
		return <-served
	}
	say("still serving; press Ctrl-C to stop. Try another instruction:\n  go run ./cmd/webordinary send --server %s --data %s --project bakery --user owner --instruction %q --wait",
		urls["api"], f.data, demo.MoreInstructions()[0])
	return <-served
}

// walkthrough onboards the sample site, emails the sample instruction through SMTP and
// follows the job to its reply.
func (f *demoFlags) walkthrough(ctx context.Context, data string, c *api.Client, urls map[string]string, key ed25519.PrivateKey,
	spec project.AgentSpec, label string, say func(string, ...any)) error {
	say("creating the sample site (a local git repository)")
	repo, err := demo.CreateSampleRepo(ctx, filepath.Join(data, "demo"))
	if err != nil {
		return err
	}
	say("sample site: %s (a local git repository)\n      agent: %s", repo, label)
	p := project.Project{ID: "bakery", RepoURL: repo, Agent: spec, Senders: map[string]string{demoSender: "owner"}}
	if _, err := c.PutProject(ctx, p); err != nil {
		return err
	}
	msg, err := signedSample(key)
	if err != nil {
		return err
	}
	parsed, err := mail.ReadMessage(bytes.NewReader(msg))
	if err != nil {
		return err
	}
	msgID := strings.Trim(parsed.Header.Get("Message-Id"), "<> ")
	say("emailing %q from %s to edit@edit.localhost via smtp://%s", demo.SampleInstruction, demoSender, urls["smtp"])
	if err := smtp.SendMail(urls["smtp"], nil, demoSender, []string{"edit@edit.localhost"}, msg); err != nil {
		return fmt.Errorf("send the sample email: %w", err)
	}
	rec, err := follow(ctx, c, msgID, say)
	if err != nil {
		return err
	}
	report(data, c, rec, say)
	return nil
}

// chooseAgent picks Claude Code when its jobs can authenticate, else the demo agent.
// loginDir, when set, is a subscription login serve must share with the tenants
// (--claude-login).
func (f *demoFlags) chooseAgent(say func(string, ...any)) (spec project.AgentSpec, label, loginDir string, err error) {
	home, _ := os.UserHomeDir()
	c := chooseClaude(exec.LookPath, os.Getenv, home, time.Now())
	switch {
	case f.agent == "claude" && !c.ok:
		return spec, "", "", fmt.Errorf("--agent claude: %s", c.why)
	case f.agent == "claude" || (f.agent == "auto" && c.ok):
		return project.AgentSpec{Kind: "claude", MaxTurns: 20, MaxBudgetUSD: 1}, "Claude Code (" + c.how + ")", c.loginDir, nil
	case f.agent == "auto":
		say("not using Claude Code: %s", c.why)
	}
	self, err := os.Executable()
	if err != nil {
		return spec, "", "", err
	}
	cmd := "'" + strings.ReplaceAll(self, "'", `'\''`) + "' demo-agent"
	return project.AgentSpec{Kind: "command", Command: cmd}, "the built-in DEMO agent (literal edits, not AI; install and sign in to Claude Code for the real thing)", "", nil
}

// claudeChoice says whether Claude Code can run the demo's jobs: how it authenticates, the
// subscription login to share (its config dir), or why it cannot.
type claudeChoice struct {
	ok                 bool
	how, loginDir, why string
}

// chooseClaude decides from what a tenant's claude would see. A job's claude runs with its
// own CLAUDE_CONFIG_DIR, so a login in ~/.claude counts only because serve shares it
// (--claude-login), and only while it has not expired; an API key or Bedrock reach the job
// through its environment.
func chooseClaude(lookPath func(string) (string, error), getenv func(string) string, home string, now time.Time) claudeChoice {
	if _, err := lookPath("claude"); err != nil {
		return claudeChoice{why: "the claude CLI is not installed (npm install -g @anthropic-ai/claude-code)"}
	}
	switch {
	case getenv("ANTHROPIC_API_KEY") != "":
		return claudeChoice{ok: true, how: "ANTHROPIC_API_KEY"}
	case getenv("CLAUDE_CODE_USE_BEDROCK") == "1":
		return claudeChoice{ok: true, how: "Amazon Bedrock"}
	}
	dir := cmp.Or(getenv("CLAUDE_CONFIG_DIR"), filepath.Join(home, ".claude"))
	err := agent.CheckClaudeLogin(dir, now)
	switch {
	case err == nil:
		return claudeChoice{ok: true, how: "your subscription login, shared read-only", loginDir: dir}
	case errors.Is(err, agent.ErrLoginExpired):
		return claudeChoice{why: "Claude Code's login has expired; run claude once to refresh it, or set ANTHROPIC_API_KEY"}
	}
	return claudeChoice{why: "Claude Code is not signed in (run claude and /login, or set ANTHROPIC_API_KEY)"}
}

// demoDKIM makes (once) a signing key for the demo sender and a DNS fixture publishing it, so
// the sample email is authenticated exactly as real mail is.
func demoDKIM(data string) (ed25519.PrivateKey, string, error) {
	dir := filepath.Join(data, "demo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	keyFile, dnsFile := filepath.Join(dir, "dkim.key"), filepath.Join(dir, "dns.json")
	seed, err := os.ReadFile(keyFile)
	if err != nil || len(seed) != ed25519.SeedSize {
		seed = make([]byte, ed25519.SeedSize)
		_, _ = rand.Read(seed)
		if err := os.WriteFile(keyFile, seed, 0o600); err != nil {
			return nil, "", err
		}
	}
	key := ed25519.NewKeyFromSeed(seed)
	pub := base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey))
	fixture, _ := json.Marshal(map[string]any{"txt": map[string][]string{
		"demo._domainkey.bakery.example": {"v=DKIM1; k=ed25519; p=" + pub},
		"_dmarc.bakery.example":          {"v=DMARC1; p=reject"},
	}})
	return key, dnsFile, os.WriteFile(dnsFile, fixture, 0o644)
}

func signedSample(key ed25519.PrivateKey) ([]byte, error) {
	raw, err := demo.SampleMessage("Bakery Owner <"+demoSender+">", "edit@edit.localhost", demo.SampleSubject, demo.SampleInstruction)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	err = dkim.Sign(&out, bytes.NewReader(raw), &dkim.SignOptions{Domain: "bakery.example", Selector: "demo", Signer: key})
	return out.Bytes(), err
}

func awaitReady(ctx context.Context, file string, served <-chan error) (map[string]string, error) {
	for {
		if data, err := os.ReadFile(file); err == nil {
			var urls map[string]string
			if json.Unmarshal(data, &urls) == nil {
				return urls, nil
			}
		}
		select {
		case err := <-served:
			return nil, fmt.Errorf("serve stopped: %v", err)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// follow prints the progress (accepted, claimed, running, final) of the job carried by the
// email msgID until it ends.
func follow(ctx context.Context, c *api.Client, msgID string, say func(string, ...any)) (broker.JobRecord, error) {
	var last string
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		st, err := c.Status(ctx)
		if err != nil {
			return broker.JobRecord{}, err
		}
		for _, j := range st.Jobs {
			if jobspec.Of(j.Job).MessageID != msgID {
				continue
			}
			if line := progressLine(j, st); line != last {
				say("%s", line)
				last = line
			}
			if j.State.Final() {
				return j, nil
			}
		}
		select {
		case <-ctx.Done():
			return broker.JobRecord{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return broker.JobRecord{}, fmt.Errorf("the job did not finish within 10 minutes")
}

func progressLine(j broker.JobRecord, st api.Status) string {
	switch j.State {
	case broker.StateQueued:
		return "job " + j.Job.ID + " accepted for " + j.Job.Tenant.String() + " (thread " + j.Job.Thread + "); waiting for a worker"
	case broker.StateClaimed, broker.StateRunning:
		for _, l := range st.Leases {
			if l.Tenant == j.Job.Tenant.String() {
				return fmt.Sprintf("job %s %s on %s (lease token %d)", j.Job.ID, j.State, l.Owner, l.Token)
			}
		}
		return "job " + j.Job.ID + " " + string(j.State)
	}
	return "job " + j.Job.ID + " " + string(j.State)
}

func report(data string, c *api.Client, rec broker.JobRecord, say func(string, ...any)) {
	if rec.Result != nil {
		say("result: %s — %s", rec.State, strings.TrimSpace(rec.Result.Summary))
		for _, u := range jobreport.Of(*rec.Result).PreviewURLs {
			say("preview: %s", u)
		}
	}
	if reply := awaitReply(filepath.Join(data, "outbox"), rec.Job.ID, 30*time.Second); reply != "" {
		say("threaded reply to %s: %s (no mail.relay configured, so replies are written as .eml files)", demoSender, reply)
	} else {
		say("the reply is still queued; it will appear in %s", filepath.Join(data, "outbox"))
	}
	say("dashboard: %s/?token=%s (the token is in %s; the link sets a cookie)\n      metrics: %s/metrics",
		c.Base, c.Token, secretPath(data, apiTokenFile), c.Base)
}

// awaitReply waits for the reply to job in the outbox directory and returns its path.
func awaitReply(dir, job string, within time.Duration) string {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		matches, _ := filepath.Glob(filepath.Join(dir, "*"+job+"*.eml"))
		if len(matches) > 0 {
			return matches[0]
		}
	}
	return ""
}

// runDemoAgent is the hidden `demo-agent` command: the demo agent's process (instruction on
// stdin, edits in the working directory).
func runDemoAgent(_ context.Context, _ []string) error {
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	if code := demo.RunAgent(os.Stdin, os.Stdout, dir); code != 0 {
		return exitError(code)
	}
	return nil
}
