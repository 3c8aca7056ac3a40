// Package sesin receives mail through Amazon SES: a receipt rule stores each message in S3 and
// notifies an SNS topic, which feeds an SQS queue; the Consumer long-polls that queue, fetches
// the raw message from S3 and hands it to the same handler the SMTP intake uses (inbound).
//
// Trust: only SES's own topmost "Authentication-Results: amazonses.com" header counts (the
// handler runs mail/auth in trusted-relay mode); anything below it was in the message before
// SES saw it. The Consumer also cross-checks that header against the notification's verdicts
// and drops a message when they disagree, and drops virus or spam FAIL outright. Both sources
// are trustworthy only because the bucket accepts writes from SES alone and the queue from the
// topic alone (deploy/aws).
//
// Order and duplicates: SNS to SQS is a standard (unordered, at-least-once) path. The Consumer
// handles a batch in SES receipt order, holds a message until it is Config.Hold old (so that an
// older one from the same sender, delivered late, goes first) and never lets a sender's later
// message overtake an earlier one that is held or failed in the same batch. A notification
// delivered twice is handled twice; the handler is idempotent (the job id derives from the SES
// receipt time and the Message-ID), so it is submitted once.
package sesin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	qtypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/webordinary/webordinary/internal/mail/auth"
	"github.com/webordinary/webordinary/internal/mail/intake"
	"github.com/webordinary/webordinary/internal/retry"
)

// Defaults.
const (
	// AuthServID is the authserv-id SES writes in its Authentication-Results.
	AuthServID = "amazonses.com"
	// DefaultHold is how old a message must be before it is handled.
	DefaultHold = 2 * time.Second
	// DefaultVisibility is how long a received notification stays hidden while it is handled.
	DefaultVisibility = 2 * time.Minute
	// DefaultPollWait is the long-poll wait (SQS's maximum).
	DefaultPollWait = 20 * time.Second
	// DefaultMaxBytes bounds the raw message read from S3 (SES's S3 action takes up to 40 MB).
	DefaultMaxBytes = 40 << 20
)

// Config configures a Consumer.
type Config struct {
	// SQS and S3 are the clients. Required.
	SQS *sqs.Client
	S3  *s3.Client
	// QueueURL is the inbound notification queue. Required.
	QueueURL string
	// Handler handles each message, as for the SMTP intake (inbound.Handle). Required. A nil
	// error deletes the notification; an error wrapping intake.ErrQuarantine drops it (the raw
	// message stays in S3, and the log names its key); any other error leaves it for another
	// try after the visibility timeout and holds back that sender's later messages.
	Handler intake.Handler
	// Hold is how old (since SES's receipt) a message must be before it is handled. Default 2s.
	Hold time.Duration
	// Visibility is the visibility timeout of a received notification. Default 2m.
	Visibility time.Duration
	// PollWait is the long-poll wait, 1–20 s. Default 20s. Run returns at most this long after
	// ctx ends: a long poll is never cancelled (a cancelled ReceiveMessage can hide a message).
	PollWait time.Duration
	// MaxBytes bounds the raw message. Default 40 MiB.
	MaxBytes int64
	// Now is the clock. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	c.Hold = cmp.Or(c.Hold, DefaultHold)
	c.Visibility = cmp.Or(c.Visibility, DefaultVisibility)
	c.PollWait = cmp.Or(c.PollWait, DefaultPollWait)
	c.MaxBytes = cmp.Or(c.MaxBytes, DefaultMaxBytes)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.SQS == nil || c.S3 == nil:
		return errors.New("sesin: SQS and S3 clients are required")
	case c.QueueURL == "":
		return errors.New("sesin: QueueURL is required: the queue SES's SNS topic feeds")
	case c.Handler == nil:
		return errors.New("sesin: Handler is required")
	case c.PollWait < time.Second || c.PollWait > 20*time.Second:
		return fmt.Errorf("sesin: PollWait %v must be between 1s and 20s", c.PollWait)
	case c.Visibility < time.Second:
		return fmt.Errorf("sesin: Visibility %v must be at least 1s", c.Visibility)
	}
	return nil
}

// Consumer receives SES mail. Run it once per process (several processes may share a queue).
type Consumer struct{ cfg Config }

// New validates cfg.
func New(cfg Config) (*Consumer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Consumer{cfg: cfg}, nil
}

// Run receives and handles notifications until ctx ends, then returns nil once the poll in
// flight has come back (at most PollWait); what that poll brought is made visible again.
func (c *Consumer) Run(ctx context.Context) error {
	for {
		msgs, err := c.receive()
		if ctx.Err() != nil {
			c.giveBack(msgs)
			return nil
		}
		if err != nil {
			c.cfg.Logger.WarnContext(ctx, "sesin: receive", slog.Any("error", err))
			_ = retry.Sleep(ctx, time.Second)
			continue
		}
		c.Batch(ctx, msgs)
	}
}

// receive long-polls on a context of its own: never cancelled, bounded by PollWait.
func (c *Consumer) receive() ([]qtypes.Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.PollWait+10*time.Second)
	defer cancel()
	out, err := c.cfg.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &c.cfg.QueueURL,
		MaxNumberOfMessages: 10, WaitTimeSeconds: int32(seconds(c.cfg.PollWait)),
		VisibilityTimeout: int32(seconds(c.cfg.Visibility))})
	if err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// giveBack makes messages visible again at once.
func (c *Consumer) giveBack(msgs []qtypes.Message) {
	for _, m := range msgs {
		c.later(context.Background(), m, 0)
	}
}

// item is one received notification.
type item struct {
	msg qtypes.Message
	n   Notification
}

// Batch handles received notifications in SES receipt order (exported for tests that drive
// the consumer step by step; Run calls it).
func (c *Consumer) Batch(ctx context.Context, msgs []qtypes.Message) {
	items := c.parse(ctx, msgs)
	slices.SortStableFunc(items, func(a, b item) int { return a.n.Receipt.Timestamp.Compare(b.n.Receipt.Timestamp) })
	blocked := map[string]bool{} // senders whose earlier message waits
	for _, it := range items {
		sender := strings.ToLower(it.n.Mail.Source)
		age := c.cfg.Now().Sub(it.n.Receipt.Timestamp)
		switch {
		case ctx.Err() != nil:
			c.later(context.Background(), it.msg, 0)
		case blocked[sender]:
			c.later(ctx, it.msg, max(c.cfg.Hold-age, time.Second))
		case age < c.cfg.Hold:
			blocked[sender] = true
			c.later(ctx, it.msg, c.cfg.Hold-age)
		default:
			if !c.handle(ctx, it) {
				blocked[sender] = true
			}
		}
	}
}

// parse reads each notification; unreadable ones are left for the queue's redrive policy.
func (c *Consumer) parse(ctx context.Context, msgs []qtypes.Message) []item {
	items := make([]item, 0, len(msgs))
	for _, m := range msgs {
		n, err := ParseNotification(aws.ToString(m.Body))
		if err != nil {
			c.cfg.Logger.ErrorContext(ctx, "sesin: unreadable notification left for the dead-letter queue",
				slog.String("sqs_message_id", aws.ToString(m.MessageId)), slog.Any("error", err))
			continue
		}
		items = append(items, item{msg: m, n: n})
	}
	return items
}

// handle fetches, checks and hands one message on; false means it stays for another try.
func (c *Consumer) handle(ctx context.Context, it item) bool {
	log := c.cfg.Logger.With(slog.String("ses_message_id", it.n.Mail.MessageID), slog.String("source", it.n.Mail.Source),
		slog.String("object", it.n.Receipt.Action.BucketName+"/"+it.n.Receipt.Action.ObjectKey))
	if reason := verdictDrop(it.n); reason != "" {
		log.WarnContext(ctx, "sesin: dropped", slog.String("reason", reason))
		return c.done(ctx, it)
	}
	raw, err := c.fetch(ctx, it.n.Receipt.Action)
	if err != nil {
		log.WarnContext(ctx, "sesin: fetch the message, will retry", slog.Any("error", err))
		return false
	}
	env := envelopeOf(it.n)
	if reason := crossCheck(ctx, raw, env, it.n); reason != "" {
		log.WarnContext(ctx, "sesin: dropped", slog.String("reason", reason))
		return c.done(ctx, it)
	}
	err = c.cfg.Handler(ctx, env, raw)
	switch {
	case errors.Is(err, intake.ErrQuarantine):
		log.ErrorContext(ctx, "sesin: message cannot be handled; dropped, the raw message stays in S3", slog.Any("error", err))
	case err != nil:
		log.WarnContext(ctx, "sesin: handler failed, will retry", slog.Any("error", err))
		return false
	}
	return c.done(ctx, it)
}

// verdictDrop returns why SES's own scan verdicts refuse the message, or "".
func verdictDrop(n Notification) string {
	switch {
	case n.Receipt.VirusVerdict.Failed():
		return "SES virus verdict FAIL"
	case n.Receipt.SpamVerdict.Failed():
		return "SES spam verdict FAIL"
	case n.Receipt.DMARCVerdict.Failed():
		return "SES DMARC verdict FAIL"
	}
	return ""
}

// crossCheck compares SES's topmost Authentication-Results with the notification's verdicts;
// it returns why they disagree, or "". (The handler decides on the header; a disagreement
// means one of them is not what SES wrote.)
func crossCheck(ctx context.Context, raw []byte, env intake.Envelope, n Notification) string {
	v, _ := auth.Check(ctx, auth.Config{TrustedAuthServID: AuthServID}, auth.RequireAligned, raw,
		auth.Envelope{MailFrom: env.MailFrom, Helo: env.Helo, FromRelay: true})
	headerDKIM := slices.ContainsFunc(v.DKIM, func(d auth.DKIMResult) bool { return d.Result == "pass" })
	switch {
	case n.Receipt.DKIMVerdict.Failed() && headerDKIM:
		return "Authentication-Results says dkim=pass but the notification says DKIM FAIL"
	case n.Receipt.SPFVerdict.Failed() && v.SPF.Result == "pass":
		return "Authentication-Results says spf=pass but the notification says SPF FAIL"
	case strings.EqualFold(n.Receipt.DMARCVerdict.Status, "PASS") && v.DMARC.Reported == "fail",
		strings.EqualFold(n.Receipt.DKIMVerdict.Status, "PASS") && !headerDKIM && len(v.DKIM) > 0:
		return "Authentication-Results and the notification disagree"
	}
	return ""
}

// envelopeOf is the SMTP envelope as SES saw it.
func envelopeOf(n Notification) intake.Envelope {
	src := strings.Trim(n.Mail.Source, "<>")
	return intake.Envelope{MailFrom: src, Rcpt: n.Receipt.Recipients, ReceivedAt: n.Receipt.Timestamp,
		TLS: true, NullSender: src == "" || strings.EqualFold(src, "MAILER-DAEMON"), Helo: "inbound-smtp.amazonaws.com",
		FromRelay: true} // SES's transport is the relay's own: its Authentication-Results are trusted
}

// fetch reads the raw message from S3.
func (c *Consumer) fetch(ctx context.Context, a Action) ([]byte, error) {
	out, err := c.cfg.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: &a.BucketName, Key: &a.ObjectKey})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(out.Body, c.cfg.MaxBytes+1))
	if err == nil && int64(len(raw)) > c.cfg.MaxBytes {
		err = fmt.Errorf("message larger than %d bytes", c.cfg.MaxBytes)
	}
	return raw, err
}

// done deletes the notification; false when that failed (it will come back, and is
// recognized as a duplicate then).
func (c *Consumer) done(ctx context.Context, it item) bool {
	_, err := c.cfg.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &c.cfg.QueueURL, ReceiptHandle: it.msg.ReceiptHandle})
	if err != nil {
		c.cfg.Logger.WarnContext(ctx, "sesin: delete notification", slog.Any("error", err))
	}
	return true
}

// later makes a notification visible again after d (whole seconds, rounded up).
func (c *Consumer) later(ctx context.Context, m qtypes.Message, d time.Duration) {
	_, err := c.cfg.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &c.cfg.QueueURL,
		ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: int32(seconds(d))})
	if err != nil {
		c.cfg.Logger.WarnContext(ctx, "sesin: change visibility", slog.Any("error", err))
	}
}

func seconds(d time.Duration) int { return int((max(d, 0) + time.Second - 1) / time.Second) }
