package app

import (
	"cmp"
	"context"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/webordinary/webordinary/internal/conf"
	"github.com/webordinary/webordinary/internal/mail/intake"
	"github.com/webordinary/webordinary/internal/mail/outbox/ses"
	"github.com/webordinary/webordinary/internal/mail/sesin"
	"github.com/webordinary/webordinary/internal/preview/s3target"
)

// AWS locates the AWS services that Worker.PreviewTarget (S3) and Mail.SES, Mail.SESQueue
// (SES, SQS, S3) use, and Secrets Manager for secrets given as ARNs (readSecrets). An aws:// Engine carries its own endpoints in its URL. Credentials come
// from the SDK's usual chain (environment, profile, task role); with an endpoint set and none
// in the environment, static test credentials are used (emulators).
type AWS struct {
	// Region is the AWS region. Default: the SDK's (AWS_REGION, the profile), else us-east-1.
	Region string
	// Endpoint, when set, is used for every service (an emulator); the service fields below
	// override it.
	Endpoint                             string
	S3Endpoint, SQSEndpoint, SESEndpoint string
}

// keys registers a's keys on s (the aws section).
func (a *AWS) keys(s *conf.Section) {
	s.String(&a.Region, "region", "", "AWS region of S3 previews and SES mail (default: the SDK's, AWS_REGION, else us-east-1)").Was("aws-region")
	s.String(&a.Endpoint, "endpoint", "", "one endpoint for S3, SQS, SES and Secrets Manager, such as an emulator (http://127.0.0.1:4566)").Was("aws-endpoint")
	s.String(&a.S3Endpoint, "s3_endpoint", "", "S3 endpoint when it differs from endpoint").Was("aws-s3-endpoint")
	s.String(&a.SQSEndpoint, "sqs_endpoint", "", "SQS endpoint (SES inbound queue) when it differs from endpoint").Was("aws-sqs-endpoint")
	s.String(&a.SESEndpoint, "ses_endpoint", "", "SES endpoint when it differs from endpoint").Was("aws-ses-endpoint")
}

func (a *AWS) validate() error {
	for _, e := range []struct{ field, v string }{{"AWS.Endpoint", a.Endpoint}, {"AWS.S3Endpoint", a.S3Endpoint},
		{"AWS.SQSEndpoint", a.SQSEndpoint}, {"AWS.SESEndpoint", a.SESEndpoint}} {
		if e.v == "" {
			continue
		}
		if u, err := url.Parse(e.v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fieldErr(e.field, e.v, "want an http:// or https:// URL with a host, e.g. http://127.0.0.1:4566")
		}
	}
	return nil
}

// bucketPattern is S3's rule for bucket names (lowercase, 3–63 characters).
var bucketPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// s3Location is a parsed s3://bucket[/prefix] URL.
type s3Location struct{ bucket, prefix string }

// parseS3 reads s3://bucket[/prefix]; the prefix, when given, ends in "/".
func parseS3(field, raw string) (s3Location, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "s3" || u.RawQuery != "" || u.User != nil {
		return s3Location{}, fieldErr(field, raw, "want s3://bucket or s3://bucket/prefix (previews go to a directory when empty)")
	}
	if !bucketPattern.MatchString(u.Host) {
		return s3Location{}, fieldErr(field, raw, "bucket %q is not a valid S3 bucket name (3-63 lowercase letters, digits, dots and dashes)", u.Host)
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" {
		prefix += "/"
	}
	return s3Location{bucket: u.Host, prefix: prefix}, nil
}

// awsClients builds the SDK configuration once per process.
type awsClients struct {
	once sync.Once
	cfg  aws.Config
	err  error
}

func (a *App) awsConfig(ctx context.Context) (aws.Config, error) {
	a.aws.once.Do(func() {
		c := a.cfg.AWS
		var opts []func(*awsconfig.LoadOptions) error
		if c.Region != "" {
			opts = append(opts, awsconfig.WithRegion(c.Region))
		}
		if c.Endpoint+c.S3Endpoint+c.SQSEndpoint+c.SESEndpoint != "" && os.Getenv("AWS_ACCESS_KEY_ID") == "" {
			opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
		}
		a.aws.cfg, a.aws.err = awsconfig.LoadDefaultConfig(ctx, opts...)
		if a.aws.err == nil && a.aws.cfg.Region == "" {
			a.aws.cfg.Region = "us-east-1"
		}
	})
	if a.aws.err != nil {
		return aws.Config{}, &FieldError{Field: "AWS.Region", Value: a.cfg.AWS.Region, Err: a.aws.err}
	}
	return a.aws.cfg, nil
}

func endpointOr(service, all string) *string {
	if e := cmp.Or(service, all); e != "" {
		return aws.String(e)
	}
	return nil
}

func (a *App) s3Client(ctx context.Context) (*s3.Client, error) {
	ac, err := a.awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	e := endpointOr(a.cfg.AWS.S3Endpoint, a.cfg.AWS.Endpoint)
	return s3.NewFromConfig(ac, func(o *s3.Options) { o.BaseEndpoint, o.UsePathStyle = e, e != nil }), nil
}

// s3Previews is the S3 store of Worker.PreviewTarget; previewPort is the port in its links.
func (a *App) s3Previews(ctx context.Context, previewPort int) (*s3target.Store, error) {
	loc, err := parseS3("Worker.PreviewTarget", a.cfg.Worker.PreviewTarget)
	if err != nil {
		return nil, err
	}
	client, err := a.s3Client(ctx)
	if err != nil {
		return nil, err
	}
	return s3target.New(s3target.Config{Client: client, Bucket: loc.bucket, Prefix: loc.prefix,
		Domain: a.cfg.Worker.PreviewDomain, Port: previewPort, Logger: a.log})
}

// sesSender sends replies through SES v2; sent records SES's Message-ID of each reply.
func (a *App) sesSender(ctx context.Context, sent func(ctx context.Context, msg []byte, id string) error) (*ses.Sender, error) {
	ac, err := a.awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	e := endpointOr(a.cfg.AWS.SESEndpoint, a.cfg.AWS.Endpoint)
	client := sesv2.NewFromConfig(ac, func(o *sesv2.Options) { o.BaseEndpoint = e })
	s, err := ses.New(ses.Config{Client: client, ConfigurationSet: a.cfg.Mail.SESConfigurationSet, Sent: sent, Logger: a.log})
	if err != nil {
		return nil, &FieldError{Field: "Mail.SES", Value: true, Err: err}
	}
	return s, nil
}

// sesInbound consumes SES's notifications of received mail from Mail.SESQueue.
func (a *App) sesInbound(ctx context.Context, handle intake.Handler) (*sesin.Consumer, error) {
	ac, err := a.awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	s3c, err := a.s3Client(ctx)
	if err != nil {
		return nil, err
	}
	e := endpointOr(a.cfg.AWS.SQSEndpoint, a.cfg.AWS.Endpoint)
	sqsc := sqs.NewFromConfig(ac, func(o *sqs.Options) { o.BaseEndpoint = e })
	c, err := sesin.New(sesin.Config{SQS: sqsc, S3: s3c, QueueURL: a.cfg.Mail.SESQueue, Handler: handle,
		PollWait: a.cfg.Mail.SESPollWait, Logger: a.log})
	if err != nil {
		return nil, &FieldError{Field: "Mail.SESQueue", Value: a.cfg.Mail.SESQueue, Err: err}
	}
	return c, nil
}

// describeSES is the banner's SES part of the mail line.
func (m Mail) describeSES() string {
	var parts []string
	if m.SESQueue != "" {
		parts = append(parts, "mail in from SES through "+m.SESQueue)
	}
	if m.SES {
		parts = append(parts, "replies through SES")
	}
	return strings.Join(parts, "; ")
}
