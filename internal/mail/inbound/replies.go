package inbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/mail/outbox"
	"github.com/webordinary/webordinary/internal/metrics"
)

// OnResult turns a job's result into a threaded reply to the sender of the email that carried
// it (jobs submitted by API get none). Safe to call twice: the reply's Message-ID is stable per
// job and kind, and the outbox drops a repeat.
func (in *Inbound) OnResult(ctx context.Context, res broker.Result) error {
	if in.cfg.Outbox == nil || in.cfg.Jobs == nil {
		return nil
	}
	rec, err := in.cfg.Jobs.Get(ctx, res.JobID)
	if errors.Is(err, broker.ErrNotFound) && res.Job != nil {
		rec, err = broker.JobRecord{Job: *res.Job, Attempts: res.Attempt}, nil
	}
	if errors.Is(err, broker.ErrNotFound) {
		return nil
	}
	if err != nil || rec.Job.From == "" {
		return err
	}
	rep := in.baseReply(rec.Job, kindOf(res.State))
	fillResult(&rep, res, rec)
	return in.send(ctx, rep)
}

// Acknowledge tells the sender their instruction was accepted (projects that ask for it).
func (in *Inbound) Acknowledge(ctx context.Context, job broker.Job) error {
	if in.cfg.Outbox == nil {
		return nil
	}
	return in.send(ctx, in.baseReply(job, outbox.Received))
}

func (in *Inbound) baseReply(job broker.Job, kind outbox.Kind) outbox.Reply {
	rep := outbox.Reply{Kind: kind, To: mail.Address{Address: job.From},
		From:    mail.Address{Name: "webordinary", Address: in.Address()},
		ReplyTo: in.tokens.Address(in.cfg.Local, in.cfg.Domains[0], job.Thread),
		Subject: job.Subject, InReplyTo: job.MessageID, References: job.References, JobID: job.ID,
		Understood: job.Instruction}
	if in.cfg.JobURL != nil {
		rep.JobURL = in.cfg.JobURL(job.ID)
	}
	return rep
}

func kindOf(s broker.State) outbox.Kind {
	switch s {
	case broker.StateDone:
		return outbox.Done
	case broker.StateInterrupted:
		return outbox.Interrupted
	case broker.StateDead:
		return outbox.Dead
	}
	return outbox.Failed
}

// fillResult copies what the processor reported into the reply.
func fillResult(rep *outbox.Reply, res broker.Result, rec broker.JobRecord) {
	d := res.Report
	rep.Summary, rep.Error, rep.Duration, rep.Attempts = res.Summary, res.Error, res.Duration, rec.Attempts
	rep.Branch, rep.Commit, rep.Diffstat, rep.CostUSD = d.Branch, d.Commit, d.Diffstat, d.AgentCostUSD
	rep.LogTail, rep.PreviewURLs = d.BuildLogTail, d.PreviewURLs
	if rep.LogTail == "" && res.State != broker.StateDone {
		rep.LogTail = res.OutputTail
	}
	for _, f := range d.Files {
		rep.Files = append(rep.Files, outbox.File{Status: f.Status, Path: f.Path})
	}
	if res.State != broker.StateDone {
		rep.Hint = hintFor(res.State)
	}
}

func hintFor(s broker.State) string {
	switch s {
	case broker.StateDead:
		return "Try rephrasing the instruction, or split it into smaller steps, and send it again."
	case broker.StateInterrupted:
		return "Nothing to do: your newer message is being worked on."
	}
	return "Reply to this email with more detail, or a simpler version of the change."
}

// refuse tells a verified sender why their message was not acted on.
func (in *Inbound) refuse(ctx context.Context, r *Report) error {
	if !r.Decision.Reply || in.cfg.Outbox == nil || r.Auth == nil || !r.Auth.Pass {
		return nil
	}
	kind := outbox.Refused
	if len(r.Decision.Reason) > 12 && r.Decision.Reason[:12] == "rate limited" {
		kind = outbox.RateLimited
	}
	rep := outbox.Reply{Kind: kind, To: mail.Address{Address: r.From},
		From:    mail.Address{Name: "webordinary", Address: in.Address()},
		Subject: r.Subject, InReplyTo: r.MessageID, References: r.msg.References,
		Error: r.Decision.Reason, RetryAfter: time.Hour}
	if r.MessageID == "" {
		rep.MessageID = fmt.Sprintf("wo-refused-%d@%s", in.cfg.Now().UnixNano(), in.cfg.Domains[0])
	}
	return in.send(ctx, rep)
}

func (in *Inbound) send(ctx context.Context, rep outbox.Reply) error {
	msg, err := outbox.Compose(rep, in.cfg.Now())
	if err != nil {
		return fmt.Errorf("inbound: compose %s reply: %w", rep.Kind, err)
	}
	err = in.cfg.Outbox.Enqueue(ctx, in.Address(), []string{rep.To.Address}, msg)
	if err == nil {
		metrics.MailOut.WithLabelValues("queued").Inc()
	}
	return err
}

func parseIP(s string) net.IP { return net.ParseIP(s) }
