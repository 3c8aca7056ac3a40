package awsq

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
)

// ParseURL reads a backend URL into a Config:
//
//	aws://?region=eu-west-1&prefix=wo&endpoint=http://127.0.0.1:4566&create=1
//
// Parameters: region, prefix, endpoint (all services), sqs, dynamodb, s3 (per service), bucket,
// create (1/true: create missing resources), pollwait (a duration, e.g. 20s). The host part
// must be empty: everything is a parameter.
func ParseURL(s string) (Config, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Config{}, fmt.Errorf("awsq: backend URL: %w", err)
	}
	if u.Scheme != "aws" {
		return Config{}, fmt.Errorf("awsq: backend URL %q: scheme must be aws", s)
	}
	if u.Host != "" || (u.Path != "" && u.Path != "/") {
		return Config{}, fmt.Errorf("awsq: backend URL %q: put everything in parameters, e.g. aws://?region=us-east-1&prefix=wo", s)
	}
	return configFromQuery(u.Query())
}

func configFromQuery(q url.Values) (Config, error) {
	cfg := Config{
		Region: q.Get("region"), Prefix: q.Get("prefix"), Endpoint: q.Get("endpoint"),
		SQSEndpoint: q.Get("sqs"), DynamoDBEndpoint: q.Get("dynamodb"), S3Endpoint: q.Get("s3"),
		Bucket: q.Get("bucket"),
	}
	for k := range q {
		switch k {
		case "region", "prefix", "endpoint", "sqs", "dynamodb", "s3", "bucket", "create", "pollwait":
		default:
			return Config{}, fmt.Errorf("awsq: backend URL: unknown parameter %q", k)
		}
	}
	if v := q.Get("create"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return Config{}, fmt.Errorf("awsq: backend URL: create=%q: want true or false", v)
		}
		cfg.Create = b
	}
	if v := q.Get("pollwait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return Config{}, fmt.Errorf("awsq: backend URL: pollwait=%q: %w", v, err)
		}
		cfg.PollWait = d
	}
	return cfg, nil
}

// Open parses an aws:// URL and returns its backend; logger may be nil.
//
// TODO(app): when broker.Open with its scheme registry (branch app) is on main, register this
// scheme from an init func in this file:
//
//	broker.Register("aws", func(ctx context.Context, url string, opts broker.Options) (*broker.Backend, error) {
//		return Open(ctx, url, opts.Logger)
//	})
func Open(ctx context.Context, rawURL string, logger *slog.Logger) (*broker.Backend, error) {
	cfg, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	cfg.Logger = logger
	return New(ctx, cfg)
}
