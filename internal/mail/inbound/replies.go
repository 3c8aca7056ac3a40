package inbound

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"strings"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/mail/outbox"
	"github.com/webordinary/webordinary/internal/metrics"
	"github.com/webordinary/webordinary/internal/pipeline/report"
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
	if err != nil || jobspec.Of(rec.Job).From == "" {
		return err
	}
	rep := in.baseReply(rec.Job, kindOf(res.State))
	fillResult(&rep, res, rec)
	in.fillPublish(ctx, &rep, res, rec)
	if operatorsProblem(rep) {
		in.cfg.Logger.WarnContext(ctx, "operator attention: the owner was told you have been told",
			slog.String("job", res.JobID), slog.String("state", string(res.State)),
			slog.String("problem", string(rep.Problem)), slog.String("error", res.Error))
	}
	if rep.Kind == outbox.Done && in.cfg.Pictures != nil {
		rep.Images = in.cfg.Pictures(res.JobID)
	}
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
	s := jobspec.Of(job)
	rep := outbox.Reply{Kind: kind, To: mail.Address{Address: s.From},
		From:    mail.Address{Name: "webordinary", Address: in.Address()},
		ReplyTo: in.tokens.Address(in.cfg.Local, in.cfg.Domains[0], job.Thread),
		Subject: s.Subject, InReplyTo: s.MessageID, References: s.References, JobID: job.ID,
		Understood: s.Instruction, Guessed: s.Guessed, ThreadURL: in.threadURL(job)}
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
	d := report.Of(res)
	rep.Summary, rep.Error, rep.Attempts, rep.Commit = res.Summary, res.Error, rec.Attempts, d.Commit
	rep.PreviewURLs = d.PreviewURLs
	rep.Superseded, rep.Continued, rep.NoChanges, rep.LeftOut = d.InterruptedBy != "", len(d.Continues), d.NoChanges, d.LeftOut
	rep.Problem = d.Failure
}

// refuse tells a verified sender why their message was not acted on.
func (in *Inbound) refuse(ctx context.Context, r *Report) error {
	if !r.Decision.Reply || in.cfg.Outbox == nil || r.Auth == nil || !r.Auth.Pass {
		return nil
	}
	rep := outbox.Reply{Kind: outbox.Refused, To: mail.Address{Address: r.From},
		From:    mail.Address{Name: "webordinary", Address: in.Address()},
		Subject: r.Subject, InReplyTo: r.MessageID, References: r.msg.References,
		Error: ownerReason(r.Decision.Reason)}
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

// ownerReason is a refusal's reason as the sender reads it: the operator's part (what to run)
// stays in the log.
func ownerReason(reason string) string {
	if i := strings.Index(reason, " ("); i > 0 && strings.HasSuffix(reason, ")") {
		return reason[:i]
	}
	return reason
}

// operatorsProblem reports a failure the owner's reply says the operator has been told of.
func operatorsProblem(rep outbox.Reply) bool {
	return rep.Kind == outbox.Dead || rep.Kind == outbox.Failed && rep.Problem.Operators()
}
