package inbound

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/mail/auth"
	"github.com/webordinary/webordinary/internal/mail/intake"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/router"
)

// Resolution failures.
var (
	errUnknownSender = errors.New("no project lists this sender")
	errForeignThread = errors.New("this conversation belongs to another user")
	errAmbiguous     = errors.New("this sender is registered for several projects")
)

// decide fills r.Thread, r.Auth and r.Decision. count applies the rate limits. It returns an
// error only for a temporary failure (DNS, the engine), when the message should wait.
func (in *Inbound) decide(ctx context.Context, env intake.Envelope, r *Report, count bool) error {
	if env.NullSender { // a bounce or other automatic mail: never run, never answered
		r.Loop = "a null reverse-path (MAIL FROM:<>)"
		r.Decision = Decision{Action: "ignore", Reason: "not answering " + r.Loop + ": automatic mail"}
		return nil
	}
	if loop := loopVerdict(r.msg, in.cfg.Local, in.cfg.Domains); loop != "" {
		r.Loop = loop
		r.Decision = Decision{Action: "ignore", Reason: "not answering " + loop}
		return nil
	}
	if r.From == "" {
		r.Decision = Decision{Action: "ignore", Reason: "the message has no From address"}
		return nil
	}
	proj, rerr := in.resolve(ctx, env, r)
	if rerr != nil && !isResolution(rerr) {
		return rerr
	}
	r.proj = proj
	verdict, aerr := auth.Check(ctx, in.cfg.Auth, auth.Policy(proj.MailAuth), r.raw,
		auth.Envelope{RemoteIP: parseIP(env.RemoteIP), Helo: env.Helo, MailFrom: env.MailFrom, FromRelay: env.FromRelay})
	r.Auth = &verdict
	switch {
	case errors.Is(aerr, auth.ErrTemporary) || (aerr != nil && ctx.Err() != nil):
		return aerr
	case aerr != nil:
		r.Decision = Decision{Action: "ignore", Reason: "sender not authenticated: " + verdict.Reason}
		return nil
	case rerr != nil:
		r.Decision = Decision{Action: "refuse", Reason: refusal(rerr, in.Address()), Reply: true}
		return nil
	}
	r.Decision = in.admit(r, count && !env.Released)
	return nil
}

// admit applies the content and rate checks to an authenticated, resolved message. Over a
// rate limit, the message is held (Action "hold"): kept for the operator, never dropped.
func (in *Inbound) admit(r *Report, count bool) Decision {
	if d, refused := liveAction(r); refused {
		return d
	}
	if strings.TrimSpace(r.Instruction) == "" && len(r.Attachments) == 0 {
		return Decision{Action: "refuse", Reason: "the message has no instruction: write what to change above any quoted text", Reply: true}
	}
	if strings.TrimSpace(r.Instruction) == "" {
		r.Instruction = "Add the attached files to the site where they fit."
	}
	if !count {
		return Decision{Action: "run", Reason: "authenticated sender, " + r.Thread.By}
	}
	now := in.cfg.Now()
	tenantKey := r.Thread.Project + "/" + r.Thread.User
	if ok, until := in.perSender.allow(r.From, now); !ok {
		r.heldUntil = until
		return Decision{Action: "hold", Reason: "rate limited: too many instructions in the last hour from " + r.From}
	}
	if ok, until := in.perTenant.allow(tenantKey, now); !ok {
		in.perSender.refund(r.From)
		r.heldUntil = until
		return Decision{Action: "hold", Reason: "rate limited: too many instructions in the last hour for " + tenantKey}
	}
	r.counted = true
	return Decision{Action: "run", Reason: "authenticated sender, " + r.Thread.By}
}

func isResolution(err error) bool {
	return errors.Is(err, errUnknownSender) || errors.Is(err, errForeignThread) || errors.Is(err, errAmbiguous)
}

func refusal(err error, ours string) string {
	switch {
	case errors.Is(err, errUnknownSender):
		return "this address is not registered to make changes to any site here; if it should be, ask the person who manages your site (operator: webordinary project add --sender ADDRESS=USER)"
	case errors.Is(err, errForeignThread):
		return "this conversation belongs to another person; start a new message to " + ours + " instead of replying to theirs"
	}
	return err.Error()
}

// resolve finds the tenant and thread: a reply token, then In-Reply-To/References, then the
// sender in the project table (a new thread). It returns the project (for its mail policy)
// even with a resolution error when one is known.
func (in *Inbound) resolve(ctx context.Context, env intake.Envelope, r *Report) (project.Project, error) {
	if th, ok, err := in.byToken(ctx, env, r); ok || err != nil {
		return in.threadTenant(ctx, r, th, "token", err)
	}
	if th, ok, err := in.byReference(ctx, r); ok || err != nil {
		return in.threadTenant(ctx, r, th, "in-reply-to", err)
	}
	return in.bySender(ctx, env, r)
}

func (in *Inbound) byToken(ctx context.Context, env intake.Envelope, r *Report) (project.Thread, bool, error) {
	for _, addr := range append(append([]string{}, env.Rcpt...), r.To...) {
		if id, ok := in.tokens.FromAddress(strings.ToLower(addr)); ok {
			th, err := in.cfg.Threads.Get(ctx, id)
			if errors.Is(err, project.ErrNotFound) {
				continue
			}
			return th, err == nil, err
		}
	}
	return project.Thread{}, false, nil
}

func (in *Inbound) byReference(ctx context.Context, r *Report) (project.Thread, bool, error) {
	refs := append([]string{r.msg.InReplyTo}, reverse(r.msg.References)...)
	for _, id := range refs {
		if id == "" {
			continue
		}
		v, _, err := in.cfg.Mail.Get(ctx, msgKey(id))
		if err != nil || len(v) == 0 {
			continue
		}
		th, err := in.cfg.Threads.Get(ctx, string(v))
		if err == nil {
			return th, true, nil
		}
	}
	return project.Thread{}, false, nil
}

// threadTenant checks that the sender is the thread's user: a thread is bound to its user.
func (in *Inbound) threadTenant(ctx context.Context, r *Report, th project.Thread, by string, err error) (project.Project, error) {
	if err != nil {
		return project.Project{}, err
	}
	proj, err := in.cfg.Projects.Get(ctx, th.Tenant.Project)
	if err != nil {
		return proj, fmt.Errorf("%w: thread %s's project is gone", errUnknownSender, th.ID)
	}
	r.Thread = Resolution{By: by, Project: th.Tenant.Project, User: th.Tenant.User, Thread: th.ID}
	if user, ok := proj.Senders[strings.ToLower(r.From)]; !ok || user != th.Tenant.User {
		return proj, errForeignThread
	}
	return proj, nil
}

// bySender finds the sender's project; the recipient's local part may name the project when
// the sender belongs to several.
func (in *Inbound) bySender(ctx context.Context, env intake.Envelope, r *Report) (project.Project, error) {
	projects, err := in.cfg.Projects.List(ctx)
	if err != nil {
		return project.Project{}, err
	}
	var matches []project.Project
	for _, p := range projects {
		if _, ok := p.Senders[strings.ToLower(r.From)]; ok {
			matches = append(matches, p)
		}
	}
	p, err := pick(matches, append(append([]string{}, env.Rcpt...), r.To...))
	if err != nil {
		return p, err
	}
	r.Thread = Resolution{By: "sender", Project: p.ID, User: p.Senders[strings.ToLower(r.From)], Thread: newThreadID(env, r), New: true}
	return p, nil
}

// newThreadID is derived from the spooled message, so handling it again (after a crash or a
// temporary failure) names the same new thread.
func newThreadID(env intake.Envelope, r *Report) string {
	if env.ReceivedAt.IsZero() {
		return router.NewThreadID()
	}
	sum := sha256.Sum256([]byte(env.ReceivedAt.UTC().Format(time.RFC3339Nano) + "\x00" + r.MessageID + "\x00" + r.From))
	return "t" + hex.EncodeToString(sum[:6])
}

func pick(matches []project.Project, rcpts []string) (project.Project, error) {
	switch len(matches) {
	case 0:
		return project.Project{}, errUnknownSender
	case 1:
		return matches[0], nil
	}
	var ids []string
	for _, p := range matches {
		ids = append(ids, p.ID)
		for _, rc := range rcpts {
			local, _, _ := strings.Cut(strings.ToLower(rc), "@")
			if base, _, _ := strings.Cut(local, "+"); base == p.ID {
				return p, nil
			}
		}
	}
	return matches[0], fmt.Errorf("%w (%s): write to <project>@ this domain to say which", errAmbiguous, strings.Join(ids, ", "))
}

func reverse(s []string) []string {
	out := make([]string, 0, len(s))
	for i := len(s) - 1; i >= 0; i-- {
		out = append(out, s[i])
	}
	return out
}
