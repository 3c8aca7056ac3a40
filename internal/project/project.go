// Package project stores what webordinary knows about a site: the project record (repo,
// build, agent, policies, senders) and the threads of conversation about it (branch, agent
// session, owner). Both live in broker tables, so every backend keeps them.
package project

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/egress"
	"github.com/webordinary/webordinary/internal/jobenv"
	"github.com/webordinary/webordinary/internal/sandbox"
	"github.com/webordinary/webordinary/internal/tenant"
)

// ErrNotFound: no such project or thread.
var ErrNotFound = errors.New("not found")

// Project is one site.
type Project struct {
	ID            string `json:"id"`
	RepoURL       string `json:"repoUrl"`
	DefaultBranch string `json:"defaultBranch"`
	// Build: empty fields are auto-detected (package.json → npm install + npm run build → dist/;
	// otherwise the repository is the site).
	BuildCommand string `json:"buildCommand,omitempty"`
	OutputDir    string `json:"outputDir,omitempty"`
	// Agent: kind (claude, codex, opencode, command), command or binary, limits.
	Agent AgentSpec `json:"agent"`
	// InterruptPolicy says what a new instruction on a thread does to that thread's running
	// job: interrupt it, or queue behind it; empty means the server's default
	// (app.Config.InterruptPolicy).
	// An instruction on another thread always waits its turn.
	InterruptPolicy string `json:"interruptPolicy,omitempty"`
	// AttachmentsDir is where a job's attachments land in the repo. Default "public/attachments".
	AttachmentsDir string `json:"attachmentsDir"`
	// MaxAttachmentBytes bounds one attachment. Default 10 MB.
	MaxAttachmentBytes int64 `json:"maxAttachmentBytes"`
	// RepairTurns is how many times the agent may fix a failed build. 0 means the default, 1;
	// a negative value means none.
	RepairTurns int `json:"repairTurns"`
	// CheckTurn gives the agent one more turn after the preview deploy and its pictures: it
	// sees the instruction and the after-pictures, and may fix an obvious miss before the
	// reply goes out (the fix is rebuilt, redeployed and pictured again). The turn costs
	// agent time and money; its failure never fails the job. Off by default.
	CheckTurn bool `json:"checkTurn,omitempty"`
	// Senders maps a sender address to the user id it acts as.
	Senders map[string]string `json:"senders,omitempty"`
	// MailAuth is the sender authentication required: aligned (DKIM or SPF aligned with From,
	// the default), dkim (an aligned DKIM signature), or none (trusted setups only).
	MailAuth string `json:"mailAuth"`
	// Env are variables the project's agent and build get on purpose: "NAME" passes the
	// worker's value, "NAME=VALUE" sets one (stored in this record: pass secrets by name).
	// WO_* names are refused.
	Env []string `json:"env,omitempty"`
	// BuildOffline runs the site's build command without network (the install keeps it).
	BuildOffline bool `json:"buildOffline,omitempty"`
	// JobLimits bound this project's sandboxed jobs ("mem=4GiB,procs=512", sandbox.ParseLimits);
	// the limits it leaves unset are the worker's (--job-limits).
	JobLimits string `json:"jobLimits,omitempty"`
	// EgressAllow are hosts this project's jobs may reach through the egress proxy besides
	// the defaults (npm registry, the remote's git host, the model APIs): "host" (ports 80
	// and 443), "host:port", "*.domain" or "*" (any public host).
	EgressAllow []string `json:"egressAllow,omitempty"`
	// Acknowledge sends a "received" reply with the job's link when an email is accepted.
	Acknowledge bool      `json:"acknowledge,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
}

// AgentSpec is a project's agent choice and limits (see package agent).
type AgentSpec struct {
	Kind         string        `json:"kind"`
	Command      string        `json:"command,omitempty"`
	Model        string        `json:"model,omitempty"`
	MaxTurns     int           `json:"maxTurns,omitempty"`
	MaxBudgetUSD float64       `json:"maxBudgetUsd,omitempty"`
	WallClock    time.Duration `json:"wallClock,omitempty"`
	NoOutput     time.Duration `json:"noOutput,omitempty"`
	// BaseURL points the agent at a model API endpoint (agent.Spec.BaseURL); empty: the
	// server's default (app Worker.AgentBaseURL), else the vendor's.
	BaseURL string `json:"baseUrl,omitempty"`
}

// WithDefaults fills unset fields.
func (p Project) WithDefaults() Project {
	if p.DefaultBranch == "" {
		p.DefaultBranch = "main"
	}
	if p.Agent.Kind == "" {
		p.Agent.Kind = "claude"
	}
	if p.AttachmentsDir == "" {
		p.AttachmentsDir = "public/attachments"
	}
	if p.MaxAttachmentBytes == 0 {
		p.MaxAttachmentBytes = 10 << 20
	}
	if p.RepairTurns == 0 {
		p.RepairTurns = 1
	}
	if p.MailAuth == "" {
		p.MailAuth = "aligned"
	}
	return p
}

// Validate says what is wrong, in words a person can act on.
func (p Project) Validate() error {
	if err := tenant.ValidatePart("project", p.ID); err != nil {
		return err
	}
	if p.RepoURL == "" {
		return errors.New("project needs a repository: --repo URL (https://..., ssh://..., git@host:path or a local path)")
	}
	if u, err := url.Parse(p.RepoURL); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.User != nil {
		return errors.New("--repo carries a user or password in its URL, which every job could read from the workspace's git config: give the URL without it and the token as WO_GIT_TOKEN in serve's and the workers' environment")
	}
	switch p.Agent.Kind {
	case "claude", "codex", "opencode":
	case "command":
		if p.Agent.Command == "" {
			return errors.New("agent kind command needs --agent-command")
		}
	default:
		return fmt.Errorf("agent %q: use claude, codex, opencode or command", p.Agent.Kind)
	}
	if p.CheckTurn && p.Agent.Kind == "command" {
		return errors.New("the check turn needs an agent that can look at pictures (claude, codex or opencode), not a command: drop --check-turn or change --agent")
	}
	if u, err := url.Parse(p.Agent.BaseURL); p.Agent.BaseURL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		return fmt.Errorf("agent base URL %q: want http://host[:port][/path] or https://…", p.Agent.BaseURL)
	}
	if p.InterruptPolicy != "" && p.InterruptPolicy != "interrupt" && p.InterruptPolicy != "queue" {
		return fmt.Errorf("interrupt policy %q: use interrupt or queue (or leave it empty for the server's)", p.InterruptPolicy)
	}
	switch p.MailAuth {
	case "aligned", "dkim", "none":
	default:
		return fmt.Errorf("mail auth %q: use aligned, dkim or none", p.MailAuth)
	}
	if strings.Contains(p.AttachmentsDir, "..") || strings.HasPrefix(p.AttachmentsDir, "/") {
		return fmt.Errorf("attachments dir %q must be a relative path inside the repository", p.AttachmentsDir)
	}
	if _, err := jobenv.Parse(p.Env); err != nil {
		return err
	}
	if _, err := sandbox.ParseLimits(p.JobLimits); err != nil {
		return err
	}
	for _, a := range p.EgressAllow {
		if err := egress.CheckAllow(a); err != nil {
			return err
		}
	}
	return p.validateSenders()
}

func (p Project) validateSenders() error {
	for addr, user := range p.Senders {
		if a, err := mail.ParseAddress(addr); err != nil || a.Address != addr {
			return fmt.Errorf("sender %q is not a plain email address (like alice@example.com)", addr)
		}
		if err := tenant.ValidatePart("user", user); err != nil {
			return fmt.Errorf("sender %s: %w", addr, err)
		}
	}
	return nil
}

// Store keeps projects in a broker table.
type Store struct{ t broker.Table }

// Open opens the projects table of b.
func Open(ctx context.Context, b *broker.Backend) (*Store, error) {
	t, err := b.Table(ctx, "projects")
	if err != nil {
		return nil, err
	}
	return &Store{t: t}, nil
}

// Put validates and stores p (with defaults), replacing any earlier record.
func (s *Store) Put(ctx context.Context, p Project) (Project, error) {
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return p, err
	}
	if p.CreatedAt.IsZero() {
		p.CreatedAt = time.Now().UTC()
	}
	data, _ := json.Marshal(p)
	_, err := s.t.Put(ctx, p.ID, data)
	return p, err
}

// Get returns the project or ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (Project, error) {
	data, _, err := s.t.Get(ctx, id)
	if errors.Is(err, broker.ErrNotFound) {
		return Project{}, fmt.Errorf("%w: no project %q (add it with `webordinary project add --id %s --repo URL`)", ErrNotFound, id, id)
	}
	if err != nil {
		return Project{}, err
	}
	var p Project
	if err := json.Unmarshal(data, &p); err != nil {
		return Project{}, fmt.Errorf("project %s: %w", id, err)
	}
	return p.WithDefaults(), nil
}

// InterruptPolicy returns project id's interrupt policy, or def when it has none or its
// record cannot be read.
func (s *Store) InterruptPolicy(ctx context.Context, id, def string) string {
	p, err := s.Get(ctx, id)
	if err != nil || p.InterruptPolicy == "" {
		return def
	}
	return p.InterruptPolicy
}

// List returns every project, by id.
func (s *Store) List(ctx context.Context) ([]Project, error) {
	keys, err := s.t.Keys(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Project, 0, len(keys))
	for _, k := range keys {
		if p, err := s.Get(ctx, k); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// Remove deletes the project record (not its repository or workspaces).
func (s *Store) Remove(ctx context.Context, id string) error {
	if _, err := s.Get(ctx, id); err != nil {
		return err
	}
	return s.t.Delete(ctx, id)
}
