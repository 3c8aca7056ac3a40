// Package ses is an outbox.Sender on Amazon SES v2 (SendEmail with the raw, composed message).
//
// SES replaces the Message-ID of every message it sends with its own
// (<id@email.amazonses.com>, or <id@REGION.amazonses.com> outside us-east-1), so the stable
// Message-ID the outbox composed never reaches the owner. After each accepted send the Sender
// calls Config.Sent with that id; serve wires it to inbound.RecordSent, so an owner's reply whose
// In-Reply-To names SES's id still finds its thread. (The reply token in Reply-To stays the
// primary threading key; References usually carries the owner's own earlier ids as well.)
package ses

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"

	"github.com/webordinary/webordinary/internal/mail/outbox"
)

// Config configures a Sender.
type Config struct {
	// Client is the SES v2 client (region, credentials, endpoint). Required. Its retryer is
	// bypassed: the outbox retries.
	Client *sesv2.Client
	// ConfigurationSet, when set, is named on every send (bounce and complaint events).
	ConfigurationSet string
	// Sent, when set, is called after SES accepted a message, with the message as composed and
	// the Message-ID SES gave it ("<id@email.amazonses.com>"). Its error is logged, never
	// returned: the message is already sent and must not be sent again.
	Sent func(ctx context.Context, msg []byte, messageID string) error
	// Logger receives failures of Sent. Default: slog.Default().
	Logger *slog.Logger
}

// Sender sends through SES. Safe for concurrent use.
type Sender struct {
	cfg    Config
	domain string // of SES's Message-IDs
}

var _ outbox.Sender = (*Sender)(nil)

// New validates cfg.
func New(cfg Config) (*Sender, error) {
	if cfg.Client == nil {
		return nil, errors.New("ses sender: Client is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Sender{cfg: cfg, domain: MessageIDDomain(cfg.Client.Options().Region)}, nil
}

// MessageIDDomain is the domain of the Message-IDs SES gives messages sent from region.
func MessageIDDomain(region string) string {
	if region == "" || region == "us-east-1" {
		return "email.amazonses.com"
	}
	return region + ".amazonses.com"
}

// Send implements outbox.Sender: one SendEmail call with the raw message, no retries.
func (s *Sender) Send(ctx context.Context, from string, to []string, msg []byte) error {
	in := &sesv2.SendEmailInput{
		FromEmailAddress: aws.String(from),
		Destination:      &types.Destination{ToAddresses: to},
		Content:          &types.EmailContent{Raw: &types.RawMessage{Data: msg}},
	}
	if s.cfg.ConfigurationSet != "" {
		in.ConfigurationSetName = aws.String(s.cfg.ConfigurationSet)
	}
	out, err := s.cfg.Client.SendEmail(ctx, in, func(o *sesv2.Options) { o.Retryer = aws.NopRetryer{} })
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return classify(err)
	}
	s.sent(ctx, msg, aws.ToString(out.MessageId))
	return nil
}

// sent reports SES's Message-ID to Config.Sent.
func (s *Sender) sent(ctx context.Context, msg []byte, sesID string) {
	if s.cfg.Sent == nil || sesID == "" {
		return
	}
	id := "<" + sesID + "@" + s.domain + ">"
	if err := s.cfg.Sent(ctx, msg, id); err != nil {
		s.cfg.Logger.WarnContext(ctx, "ses: record SES's Message-ID", slog.String("message_id", ourID(msg)),
			slog.String("ses_message_id", id), slog.Any("error", err))
	}
}

func ourID(msg []byte) string {
	m, err := mail.ReadMessage(strings.NewReader(string(msg)))
	if err != nil {
		return ""
	}
	return m.Header.Get("Message-ID")
}

// permanentCodes are SES errors that sending the same message again cannot cure.
var permanentCodes = map[string]bool{
	"MessageRejected":                    true, // content or address refused (or unverified in the sandbox)
	"MailFromDomainNotVerifiedException": true,
	"AccountSuspendedException":          true,
	"SendingPausedException":             true,
	"NotFoundException":                  true, // configuration set or identity
	"BadRequestException":                true,
	"ValidationException":                true,
}

// classify wraps err as outbox.ErrPermanent or outbox.ErrTemporary. Throttling, limits,
// server errors, credentials and network trouble are temporary.
func classify(err error) error {
	var ae smithy.APIError
	if errors.As(err, &ae) && permanentCodes[ae.ErrorCode()] {
		return fmt.Errorf("%w: ses: %s: %w", outbox.ErrPermanent, ae.ErrorCode(), err)
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() == 400 && (ae == nil || !temporaryCode(ae.ErrorCode())) {
		return fmt.Errorf("%w: ses: %w", outbox.ErrPermanent, err)
	}
	return fmt.Errorf("%w: ses: %w", outbox.ErrTemporary, err)
}

// temporaryCode reports 400-status codes that are worth retrying.
func temporaryCode(code string) bool {
	switch code {
	case "TooManyRequestsException", "LimitExceededException", "Throttling", "ThrottlingException",
		"RequestTimeout", "RequestExpired", "InvalidSignatureException", "UnrecognizedClientException",
		"ExpiredTokenException", "AccessDeniedException":
		return true
	}
	return false
}
