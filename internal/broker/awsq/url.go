package awsq

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
)

// Scheme is this backend's broker.Open scheme.
const Scheme = "aws"

func init() { broker.Register(Scheme, open) }

// urlParams are the parameters of an aws:// URL, in the order the help lists them.
var urlParams = []string{"region", "prefix", "endpoint", "sqs", "dynamodb", "s3", "bucket", "create", "pollwait"}

// ParseURL reads a backend URL into a Config:
//
//	aws://?region=eu-west-1&prefix=wo
//	aws://?region=us-east-1&prefix=dev&endpoint=http://127.0.0.1:4566&create=true
//
// Parameters (all optional): region (default: the SDK's, from AWS_REGION or the profile, else
// us-east-1), prefix (names every queue, table and bucket; default wo), endpoint (one URL for
// SQS, DynamoDB and S3: an emulator or LocalStack), sqs, dynamodb, s3 (per-service endpoints,
// overriding endpoint), bucket (payloads over SQS's limit; default <prefix>-payloads), create
// (true: create missing tables, queues and the bucket at open, for development), pollwait (the
// long-poll wait, 1s–20s, default 20s). The host and path must be empty: everything is a
// parameter. Credentials come from the SDK's usual chain, never from the URL.
func ParseURL(s string) (Config, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Config{}, fmt.Errorf("awsq: backend URL %q: %w", s, err)
	}
	if u.Scheme != Scheme {
		return Config{}, fmt.Errorf("awsq: backend URL %q: scheme must be aws", s)
	}
	if u.User != nil {
		return Config{}, fmt.Errorf("awsq: backend URL %q: remove the credentials; the AWS SDK reads them from the environment, profile or role", s)
	}
	if u.Host != "" || (u.Path != "" && u.Path != "/") {
		return Config{}, fmt.Errorf("awsq: backend URL %q: put everything in parameters, e.g. aws://?region=us-east-1&prefix=wo", s)
	}
	cfg, err := configFromQuery(u.Query())
	if err != nil {
		return Config{}, fmt.Errorf("awsq: backend URL %q: %w", s, err)
	}
	if err := cfg.withDefaults().validate(); err != nil {
		return Config{}, fmt.Errorf("backend URL %q: %w", s, err)
	}
	return cfg, nil
}

func configFromQuery(q url.Values) (Config, error) {
	cfg := Config{
		Region: q.Get("region"), Prefix: q.Get("prefix"), Endpoint: q.Get("endpoint"),
		SQSEndpoint: q.Get("sqs"), DynamoDBEndpoint: q.Get("dynamodb"), S3Endpoint: q.Get("s3"),
		Bucket: q.Get("bucket"),
	}
	for k := range q {
		if !slices.Contains(urlParams, k) {
			return Config{}, fmt.Errorf("unknown parameter %q (known: %s)", k, strings.Join(urlParams, ", "))
		}
	}
	for _, k := range []string{"endpoint", "sqs", "dynamodb", "s3"} {
		if v := q.Get(k); v != "" {
			if e, err := url.Parse(v); err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
				return Config{}, fmt.Errorf("%s=%q: want an http:// or https:// URL with a host", k, v)
			}
		}
	}
	if v := q.Get("create"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return Config{}, fmt.Errorf("create=%q: want true or false", v)
		}
		cfg.Create = b
	}
	if v := q.Get("pollwait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return Config{}, fmt.Errorf("pollwait=%q: want a duration between 1s and 20s", v)
		}
		cfg.PollWait = d
	}
	return cfg, nil
}

// Open parses an aws:// URL and returns its backend; logger may be nil.
func Open(ctx context.Context, rawURL string, logger *slog.Logger) (*broker.Backend, error) {
	cfg, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	cfg.Logger = logger
	b, err := New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	b.Describe = describe(cfg.withDefaults())
	b.Endpoint = rawURL
	return b, nil
}

func open(ctx context.Context, rawURL string, opts broker.Options) (*broker.Backend, error) {
	return Open(ctx, rawURL, opts.Logger)
}

func describe(cfg Config) string {
	where := "AWS"
	if cfg.Region != "" {
		where += " " + cfg.Region
	}
	if cfg.Endpoint+cfg.SQSEndpoint+cfg.DynamoDBEndpoint != "" {
		where = "AWS emulators (SQS " + cfg.SQSEndpoint + ", DynamoDB " + cfg.DynamoDBEndpoint + ")"
	}
	return fmt.Sprintf("SQS, DynamoDB and S3 on %s, prefix %s", where, cfg.Prefix)
}
