// Package inbound turns an accepted email into a decision — run, hold, ignore or refuse — and
// acts on it: it parses the message, extracts the new text of a reply, resolves the tenant and
// thread (reply token, then In-Reply-To/References, then the sender's address in the project
// table), authenticates the sender (DKIM/SPF/DMARC or a trusted relay's
// Authentication-Results), applies loop and rate guards (over a rate limit a message is held
// for the operator and its sender told once per window, never dropped), and submits the
// instruction to the router. It also turns job results into threaded replies.
// Unauthenticated or unknown senders never reach an agent, and no reply ever goes to an
// unverified address.
package inbound

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/mail/auth"
	"github.com/webordinary/webordinary/internal/mail/intake"
	"github.com/webordinary/webordinary/internal/mail/message"
	"github.com/webordinary/webordinary/internal/mail/outbox"
	"github.com/webordinary/webordinary/internal/mail/reply"
	"github.com/webordinary/webordinary/internal/metrics"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/shots"
	"github.com/webordinary/webordinary/internal/tenant"
)

// Config configures the mail router.
type Config struct {
	// Domains we receive for; the first is used in our addresses. Required.
	Domains []string
	// Local is the local part of our address (Local@Domains[0]). Default "edit".
	Local string
	// Secret signs reply tokens. Required (keep it stable across restarts).
	Secret []byte
	// Auth says how senders are authenticated (DNS or a trusted relay).
	Auth     auth.Config
	Projects *project.Store
	Threads  *project.Threads
	// Mail is a table for Message-ID de-duplication of accepted messages and the Message-ID →
	// thread index.
	Mail   broker.Table
	Jobs   broker.Jobs
	Router *router.Router
	// Outbox sends replies; nil means no replies (inspection only).
	Outbox *outbox.Outbox
	// PerSender and PerTenant bound instructions per hour. Defaults 30 and 60. A message over
	// a limit is held (intake.ErrHold) for an operator to release or drop.
	PerSender, PerTenant int
	// Notices, when set, stores the pending held notices (one key per sender), so a notice is
	// sent after a restart too. Without it they are kept in memory.
	Notices broker.Table
	// HeldNoticeAfter: a sender whose messages are held gets one notice per limit window,
	// listing them, once none of theirs was held for this long (Run sends it). Default
	// DefaultHeldNoticeAfter.
	HeldNoticeAfter time.Duration
	// WaitNoteAfter: the sender of a job that has waited this long — for a busy model service
	// (broker.JobRecord.BusySince) or queued behind earlier work — gets one short "still on
	// it" note, once per job (Run sends it). Default DefaultWaitNoteAfter; negative: none.
	WaitNoteAfter time.Duration
	// Limits bound the parsing of each message (zero fields: message's defaults). A message
	// over them is quarantined by the intake; raise them and release it to handle it after all.
	Limits message.Limits
	// LinkBase, when set, returns the base URL (scheme://host) at which PublishHandler is
	// mounted under /publish/; done replies then carry a signed publish link. "" means none.
	LinkBase func() string
	// LinkTTL is how long a publish link works. Default 7 days.
	LinkTTL time.Duration
	// Pictures, when set, returns the pictures of a finished job's change, shown inline in its
	// reply (shots.Store.Images); none is fine.
	Pictures func(jobID string) []outbox.Image
	// Shots, when set, is where the thread page reads each job's before/after pictures.
	Shots  *shots.Store
	Now    func() time.Time
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Local == "" {
		c.Local = "edit"
	}
	if c.PerSender == 0 {
		c.PerSender = 30
	}
	if c.PerTenant == 0 {
		c.PerTenant = 60
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.HeldNoticeAfter <= 0 {
		c.HeldNoticeAfter = DefaultHeldNoticeAfter
	}
	if c.WaitNoteAfter == 0 {
		c.WaitNoteAfter = DefaultWaitNoteAfter
	}
	if c.LinkTTL == 0 {
		c.LinkTTL = 7 * 24 * time.Hour
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	for i, d := range c.Domains {
		c.Domains[i] = strings.ToLower(d)
	}
	return c
}

// DefaultHeldNoticeAfter is Config.HeldNoticeAfter's default.
const DefaultHeldNoticeAfter = time.Minute

// Inbound is the mail router. Safe for concurrent use.
type Inbound struct {
	cfg       Config
	tokens    Tokens
	perSender *limiter
	perTenant *limiter
	held      heldNotices
}

// New validates cfg.
func New(cfg Config) (*Inbound, error) {
	cfg = cfg.withDefaults()
	switch {
	case len(cfg.Domains) == 0:
		return nil, errors.New("inbound: no mail domain (Config.Domains)")
	case len(cfg.Secret) < 16:
		return nil, errors.New("inbound: the reply-token secret (Config.Secret) must be at least 16 bytes")
	case cfg.Projects == nil || cfg.Threads == nil || cfg.Mail == nil:
		return nil, errors.New("inbound: project, thread and mail tables are required")
	}
	return &Inbound{cfg: cfg, tokens: Tokens{secret: cfg.Secret},
		perSender: newLimiter(cfg.PerSender, time.Hour), perTenant: newLimiter(cfg.PerTenant, time.Hour),
		held: heldNotices{bySender: map[string]*heldBatch{}}}, nil
}

// Address is our address for new conversations.
func (in *Inbound) Address() string { return in.cfg.Local + "@" + in.cfg.Domains[0] }

// Report is everything the router decided about one message, as `mail inspect` prints it.
type Report struct {
	From        string     `json:"from"`
	To          []string   `json:"to"`
	Subject     string     `json:"subject"`
	MessageID   string     `json:"messageId"`
	Thread      Resolution `json:"thread"`
	Instruction string     `json:"instruction"`
	Forwarded   bool       `json:"forwarded,omitempty"`
	// Forward is the forwarded message the instruction is about (reply.Result.Forward).
	Forward     string        `json:"forward,omitempty"`
	Guessed     bool          `json:"guessed,omitempty"` // the instruction is extraction's best guess
	Attachments []AttachInfo  `json:"attachments"`
	Auth        *auth.Verdict `json:"auth,omitempty"`
	Loop        string        `json:"loop,omitempty"`
	Problems    []string      `json:"problems,omitempty"`
	Decision    Decision      `json:"decision"` // action: run, hold, ignore, refuse (or quarantine, retry)
	JobID       string        `json:"jobId,omitempty"`
	// Publish is "publish" or "undo" when the message asks to put the thread live or take
	// its last publish back (see publish.go); empty for an edit.
	Publish   string `json:"publish,omitempty"`
	msg       *message.Message
	raw       []byte
	proj      project.Project
	counted   bool      // the rate limits counted this message
	heldUntil time.Time // held: when the limit's window ends
}

// Resolution is how the tenant and thread were found.
type Resolution struct {
	By      string `json:"by,omitempty"` // token, in-reply-to, sender
	Project string `json:"project,omitempty"`
	User    string `json:"user,omitempty"`
	Thread  string `json:"thread,omitempty"`
	New     bool   `json:"new,omitempty"`
}

// AttachInfo describes an attachment.
type AttachInfo struct {
	Name        string `json:"name"`
	ContentType string `json:"contentType"`
	Size        int    `json:"size"`
}

// Decision is what happens to the message.
type Decision struct {
	Action string `json:"action"` // run, ignore, refuse
	Reason string `json:"reason"`
	// Reply says whether the sender is told (only verified senders ever are).
	Reply bool `json:"reply"`
}

// Inspect decides about raw without acting (no job, no reply, no rate counting).
// A message the parser rejects (over the budget, or nothing readable) gets a report with the
// action "quarantine" and the parser's error.
func (in *Inbound) Inspect(ctx context.Context, env intake.Envelope, raw []byte) (*Report, error) {
	r, err := in.read(ctx, raw)
	if err != nil {
		return r, err
	}
	if err := in.decide(ctx, env, r, false); err != nil {
		r.Decision = Decision{Action: "retry", Reason: err.Error()}
	}
	return r, nil
}

// Handle decides about one accepted message and acts: submit, hold, refuse (with a reply to a
// verified sender) or ignore. It is idempotent for the same spooled message. An error wrapping
// intake.ErrQuarantine means the message cannot be parsed within the limits (set it aside);
// one wrapping intake.ErrHold means its sender is over a limit (hold it: the sender gets a
// notice from Run); any other error means "try again later" (a temporary failure).
func (in *Inbound) Handle(ctx context.Context, env intake.Envelope, raw []byte) error {
	r, err := in.Process(ctx, env, raw)
	if err == nil && r.Decision.Action == "hold" {
		err = fmt.Errorf("%w: %s", intake.ErrHold, r.Decision.Reason)
		metrics.MailIn.WithLabelValues("hold").Inc()
		return err
	}
	switch {
	case errors.Is(err, intake.ErrQuarantine):
		metrics.MailIn.WithLabelValues("quarantine").Inc()
	case err != nil:
		metrics.MailIn.WithLabelValues("retry").Inc()
	case r != nil:
		metrics.MailIn.WithLabelValues(r.Decision.Action).Inc()
	}
	return err
}

// Process is Handle, also returning the report of what was decided and done.
func (in *Inbound) Process(ctx context.Context, env intake.Envelope, raw []byte) (*Report, error) {
	r, err := in.read(ctx, raw)
	if err != nil {
		if ctx.Err() == nil {
			err = fmt.Errorf("%w: %w", intake.ErrQuarantine, err)
		}
		return r, err
	}
	if dup, err := in.seen(ctx, r.MessageID); err != nil || dup {
		if dup {
			r.Decision = Decision{Action: "ignore", Reason: "duplicate Message-ID: already handled"}
		}
		return r, err
	}
	if err := in.decide(ctx, env, r, true); err != nil {
		return r, err // temporary: handled again later
	}
	log := in.cfg.Logger.With(slog.String("from", r.From), slog.String("messageId", r.MessageID),
		slog.String("action", r.Decision.Action), slog.String("reason", r.Decision.Reason))
	switch r.Decision.Action {
	case "run":
		if err = in.submit(ctx, env, r); err != nil && r.counted {
			in.perSender.refund(r.From) // it will be handled again; count it then
			in.perTenant.refund(r.Thread.Project + "/" + r.Thread.User)
		}
		if err == nil && r.proj.Acknowledge && r.JobID != "" {
			if rec, gerr := in.cfg.Jobs.Get(ctx, r.JobID); gerr == nil {
				err = in.Acknowledge(ctx, rec.Job)
			}
		}
	case "refuse":
		err = in.refuse(ctx, r)
	case "hold":
		err = in.noteHeld(ctx, r)
	}
	if err != nil {
		return r, err
	}
	log.InfoContext(ctx, "mail handled", slog.String("job", r.JobID))
	if r.JobID == "" {
		return r, nil // not accepted: the same message sent again is handled again
	}
	return r, in.remember(ctx, r)
}

// read parses raw within the configured limits; the error is the parser's (ErrBudget,
// ErrMalformed) or ctx.Err().
func (in *Inbound) read(ctx context.Context, raw []byte) (*Report, error) {
	m, err := message.ParseContext(ctx, raw, in.cfg.Limits)
	if err != nil {
		return &Report{Decision: Decision{Action: "quarantine", Reason: "unreadable message: " + err.Error()}}, err
	}
	ex := reply.Extract(m.Text)
	r := &Report{From: m.From.Addr, Subject: m.Subject, MessageID: m.MessageID, Instruction: ex.Text,
		Forwarded: ex.Forwarded, Forward: ex.Forward, Guessed: ex.Guessed, Problems: m.Problems, msg: m, raw: raw}
	if ex.Cut {
		r.Problems = append(r.Problems[:len(r.Problems):len(r.Problems)], fmt.Sprintf("warning: the text is longer than %d KiB; the instruction was read from its first %d KiB", reply.MaxBody>>10, reply.MaxBody>>10))
	}
	for _, a := range append(append([]message.Address{}, m.To...), m.Cc...) {
		r.To = append(r.To, a.Addr)
	}
	for _, a := range m.Attachments {
		r.Attachments = append(r.Attachments, AttachInfo{Name: a.Name, ContentType: a.ContentType, Size: len(a.Data)})
	}
	return r, nil
}

// msgKey is the mail table key of a Message-ID.
func msgKey(id string) string {
	sum := sha256.Sum256([]byte(strings.Trim(strings.TrimSpace(id), "<>")))
	return "m" + hex.EncodeToString(sum[:16])
}

// seen reports a Message-ID accepted before (a duplicate delivery or a resend of a message
// that became a job). A refused or ignored message is not remembered: sent again, it is
// handled again (the sender may have been registered since).
func (in *Inbound) seen(ctx context.Context, id string) (bool, error) {
	if id == "" {
		return false, nil
	}
	_, _, err := in.cfg.Mail.Get(ctx, msgKey(id))
	if errors.Is(err, broker.ErrNotFound) {
		return false, nil
	}
	if err == nil {
		in.cfg.Logger.InfoContext(ctx, "duplicate Message-ID ignored", slog.String("messageId", id))
	}
	return err == nil, err
}

// remember records the Message-ID of an accepted message, with its thread for In-Reply-To
// matching.
func (in *Inbound) remember(ctx context.Context, r *Report) error {
	if r.MessageID == "" {
		return nil
	}
	_, err := in.cfg.Mail.Put(ctx, msgKey(r.MessageID), []byte(r.Thread.Thread))
	return err
}

func (in *Inbound) submit(ctx context.Context, env intake.Envelope, r *Report) error {
	m := r.msg
	t, err := tenant.New(r.Thread.Project, r.Thread.User)
	if err != nil {
		return fmt.Errorf("inbound: %w", err)
	}
	if _, err := in.cfg.Threads.Ensure(ctx, r.Thread.Thread, t); err != nil {
		return fmt.Errorf("inbound: thread %s: %w", r.Thread.Thread, err)
	}
	atts := make([]jobspec.Attachment, 0, len(m.Attachments))
	for _, a := range m.Attachments {
		atts = append(atts, jobspec.Attachment{Name: a.Name, ContentType: a.ContentType, Data: a.Data})
	}
	key := r.MessageID
	if key == "" {
		key = r.From + "\x00" + r.Subject + "\x00" + r.Instruction
	}
	refs := append(append([]string{}, m.References...), m.MessageID)
	id, err := broker.JobIDFor(broker.JobIDAt(env.ReceivedAt, key), t)
	if err != nil {
		return fmt.Errorf("inbound: %w", err)
	}
	rec, err := in.cfg.Router.Submit(ctx, router.Request{JobID: id,
		Project: r.Thread.Project, User: r.Thread.User, Thread: r.Thread.Thread, Instruction: r.Instruction,
		From: r.From, Subject: m.Subject, Attachments: atts, MessageID: m.MessageID, References: refs,
		Action: r.Publish, Guessed: r.Guessed, Forward: r.Forward})
	if errors.Is(err, router.ErrInvalid) {
		r.Decision = Decision{Action: "refuse", Reason: err.Error(), Reply: r.Auth != nil && r.Auth.Pass}
		return in.refuse(ctx, r)
	}
	if err != nil {
		return fmt.Errorf("inbound: submit: %w", err)
	}
	r.JobID, r.Thread.Thread = rec.Job.ID, rec.Job.Thread
	return nil
}
