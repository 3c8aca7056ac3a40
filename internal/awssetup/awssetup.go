// Package awssetup creates, idempotently, what an AWS installation of webordinary needs for
// development and tests: the broker's tables, queues and payload bucket (through awsq), the
// bucket for previews and production sites, and SES's inbound path (bucket, SNS topic, SQS
// queue with a dead-letter queue, the subscription). Production installs come from
// deploy/aws/template.yaml instead; Names is the single list both use, and a test checks the
// template against it.
package awssetup

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/webordinary/webordinary/internal/broker/awsq"
	"github.com/webordinary/webordinary/internal/shots"

	"github.com/webordinary/webordinary/internal/awserr"
)

// Retention of what lifecycle rules delete.
const (
	// InboundDays: raw inbound mail is deleted from the inbound bucket after this many days.
	InboundDays = 30
	// PayloadDays: claim-check payloads (normally deleted on ack) are swept after this many.
	PayloadDays = 15
	// PicturesDays: jobs' pictures (the blob store shots.BlobStore, opened with max age
	// shots.Keep) are deleted after this many.
	PicturesDays = int32(shots.Keep / (24 * time.Hour))
	// InboundKeyPrefix is where SES's S3 action stores raw mail.
	InboundKeyPrefix = "mail/"
)

// Names are every resource name of an installation.
type Names struct {
	// Prefix is the installation's prefix.
	Prefix string
	awsq.Resources
	// SitesBucket holds previews and production sites (s3target).
	SitesBucket string
	// InboundBucket, InboundTopic and InboundQueue are SES's receiving path; InboundDLQ takes
	// notifications that failed InboundMaxReceives times.
	InboundBucket, InboundTopic, InboundQueue, InboundDLQ string
}

// InboundMaxReceives is the inbound queue's redrive threshold.
const InboundMaxReceives = 10

// NamesFor returns the names for prefix (awsq.DefaultPrefix when empty).
func NamesFor(prefix string) Names {
	if prefix == "" {
		prefix = awsq.DefaultPrefix
	}
	return Names{Prefix: prefix, Resources: awsq.ResourcesFor(prefix), SitesBucket: prefix + "-sites",
		InboundBucket: prefix + "-inbound", InboundTopic: prefix + "-inbound",
		InboundQueue: prefix + "-inbound", InboundDLQ: prefix + "-inbound-dlq"}
}

// Config says where to set up.
type Config struct {
	// Prefix of every name; default "wo". See awsq.Config.Prefix for the pattern.
	Prefix string
	// Region; default the SDK's, else us-east-1.
	Region string
	// Endpoint, when set, is used for every service (an emulator); credentials then default
	// to static test ones when the environment has none.
	Endpoint string
	// DynamoDBEndpoint overrides Endpoint for DynamoDB (fauxqs serves SQS, SNS and S3; dynalite
	// or DynamoDB Local serves DynamoDB).
	DynamoDBEndpoint string
	// Logger receives what was done. Default: slog.Default().
	Logger *slog.Logger
}

// Step is one thing Setup did.
type Step struct {
	Resource string // "bucket wo-sites"
	Result   string // "ready", or "skipped: …" for a setting the service refused
}

// Setup creates what is missing and returns what it did. Running it again changes nothing.
// Settings an emulator does not support (TTL on dynalite, lifecycle rules on fauxqs) are
// reported as skipped, not failed.
func Setup(ctx context.Context, cfg Config) ([]Step, error) {
	n := NamesFor(cfg.Prefix)
	ac, err := load(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s := &setup{n: n, cfg: cfg, s3: s3.NewFromConfig(ac, func(o *s3.Options) { endpoint(&o.BaseEndpoint, cfg.Endpoint); o.UsePathStyle = cfg.Endpoint != "" }),
		sqs: sqs.NewFromConfig(ac, func(o *sqs.Options) { endpoint(&o.BaseEndpoint, cfg.Endpoint) }),
		sns: sns.NewFromConfig(ac, func(o *sns.Options) { endpoint(&o.BaseEndpoint, cfg.Endpoint) }),
		ddb: dynamodb.NewFromConfig(ac, func(o *dynamodb.Options) { endpoint(&o.BaseEndpoint, cmp.Or(cfg.DynamoDBEndpoint, cfg.Endpoint)) })}
	for _, step := range []func(context.Context) error{s.broker, s.ttl, s.buckets, s.lifecycle, s.inbound} {
		if err := step(ctx); err != nil {
			return s.steps, err
		}
	}
	return s.steps, nil
}

type setup struct {
	n     Names
	cfg   Config
	s3    *s3.Client
	sqs   *sqs.Client
	sns   *sns.Client
	ddb   *dynamodb.Client
	steps []Step
}

func (s *setup) did(resource string, err error) {
	r := "ready"
	var ae smithy.APIError
	switch {
	case errors.As(err, &ae):
		r = "skipped: the service answered " + ae.ErrorCode()
	case err != nil:
		r = "skipped: " + err.Error()
	}
	s.steps = append(s.steps, Step{Resource: resource, Result: r})
}

// broker creates the broker's tables, shared queues and payload bucket through awsq itself.
func (s *setup) broker(ctx context.Context) error {
	b, err := awsq.New(ctx, awsq.Config{Prefix: s.n.Prefix,
		Region: s.cfg.Region, Endpoint: s.cfg.Endpoint, DynamoDBEndpoint: s.cfg.DynamoDBEndpoint, Create: true, PollWait: awsq.DefaultPollWait})
	if err != nil {
		return err
	}
	if err := b.Close(); err != nil {
		return err
	}
	for _, t := range s.n.Tables {
		s.did("table "+t, nil)
	}
	s.did("queue "+s.n.ClaimsQueue, nil)
	s.did("queue "+s.n.ResultsQueue, nil)
	s.did("bucket "+s.n.PayloadBucket, nil)
	return nil
}

// ttl enables TTL where items carry an expiry.
func (s *setup) ttl(ctx context.Context) error {
	for _, t := range s.n.TTLTables {
		_, err := s.ddb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(t),
			TimeToLiveSpecification: &dtypes.TimeToLiveSpecification{AttributeName: aws.String(s.n.TTLAttribute), Enabled: aws.Bool(true)}})
		if awserr.HasCode(err, "ValidationException") && strings.Contains(err.Error(), "already enabled") {
			err = nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.did("ttl "+t+"."+s.n.TTLAttribute, err)
	}
	return nil
}

func (s *setup) buckets(ctx context.Context) error {
	for _, b := range []string{s.n.SitesBucket, s.n.InboundBucket} {
		_, err := s.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)})
		if err != nil && !awserr.HasCode(err, "BucketAlreadyOwnedByYou", "BucketAlreadyExists") {
			return fmt.Errorf("create bucket %s: %w", b, err)
		}
		s.did("bucket "+b, nil)
	}
	return nil
}

// lifecycle expires raw inbound mail and stray payloads (a job's or a result's, normally
// deleted on ack). The payload bucket's blobs/ (agent state between jobs, pictures) is not
// theirs: a rule over the whole bucket would delete every tenant's agent session 15 days
// after its last job (PayloadRules).
func (s *setup) lifecycle(ctx context.Context) error {
	for b, rules := range map[string][]s3types.LifecycleRule{
		s.n.InboundBucket: {expire("inbound-mail", InboundKeyPrefix, InboundDays)},
		s.n.PayloadBucket: PayloadRules(),
	} {
		_, err := s.s3.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: aws.String(b),
			LifecycleConfiguration: &s3types.BucketLifecycleConfiguration{Rules: rules}})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ids []string
		for _, r := range rules {
			ids = append(ids, aws.ToString(r.ID))
		}
		s.did("lifecycle "+b+" "+strings.Join(ids, ","), err)
	}
	return nil
}

// PayloadRules are the payload bucket's lifecycle rules: job and result payloads expire after
// PayloadDays, jobs' pictures after PicturesDays; nothing else in the bucket does (agent
// state, blobs/states/, stays until replaced).
func PayloadRules() []s3types.LifecycleRule {
	return []s3types.LifecycleRule{
		expire("job-payloads", "inbox/", PayloadDays),
		expire("result-payloads", "results/", PayloadDays),
		expire("job-pictures", awsq.BlobPrefix(shots.BlobStore), PicturesDays),
	}
}

func expire(id, prefix string, days int32) s3types.LifecycleRule {
	return s3types.LifecycleRule{ID: aws.String(id), Status: s3types.ExpirationStatusEnabled,
		Filter: &s3types.LifecycleRuleFilter{Prefix: aws.String(prefix)}, Expiration: &s3types.LifecycleExpiration{Days: aws.Int32(days)}}
}

// inbound creates SES's topic → queue path with its dead-letter queue.
func (s *setup) inbound(ctx context.Context) error {
	dlq, err := s.queue(ctx, s.n.InboundDLQ, map[string]string{"MessageRetentionPeriod": "1209600"})
	if err != nil {
		return err
	}
	redrive := fmt.Sprintf(`{"deadLetterTargetArn":"%s","maxReceiveCount":"%d"}`, dlq, InboundMaxReceives)
	q, err := s.queue(ctx, s.n.InboundQueue, map[string]string{"VisibilityTimeout": "120", "MessageRetentionPeriod": "1209600", "RedrivePolicy": redrive})
	if err != nil {
		return err
	}
	topic, err := s.sns.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(s.n.InboundTopic)})
	if err != nil {
		return fmt.Errorf("create topic %s: %w", s.n.InboundTopic, err)
	}
	s.did("topic "+s.n.InboundTopic, nil)
	_, err = s.sns.Subscribe(ctx, &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(q)})
	if err != nil {
		return fmt.Errorf("subscribe %s to %s: %w", s.n.InboundQueue, s.n.InboundTopic, err)
	}
	s.did("subscription "+s.n.InboundTopic+" → "+s.n.InboundQueue, nil)
	return nil
}

// queue creates a standard queue (or finds it) and returns its ARN.
func (s *setup) queue(ctx context.Context, name string, attrs map[string]string) (string, error) {
	out, err := s.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return "", fmt.Errorf("create queue %s: %w", name, err)
	}
	a, err := s.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{"QueueArn"}})
	if err != nil {
		return "", fmt.Errorf("queue %s: %w", name, err)
	}
	s.did("queue "+name, nil)
	return a.Attributes["QueueArn"], nil
}

func load(ctx context.Context, cfg Config) (aws.Config, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	if cfg.Endpoint+cfg.DynamoDBEndpoint != "" && os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	ac, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load the AWS configuration: %w", err)
	}
	if ac.Region == "" {
		ac.Region = "us-east-1"
	}
	return ac, nil
}

func endpoint(dst **string, url string) {
	if url != "" {
		*dst = aws.String(url)
	}
}
