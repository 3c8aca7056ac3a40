// Package awsqtest gives tests an awsq backend on the emulators of package awstest: fauxqs for
// SQS and S3, and dynalite or DynamoDB Local for DynamoDB. Each backend gets a fresh resource
// prefix, so tests share the emulator processes and never see each other's queues or tables.
// Packages that use it call awstest.Main from TestMain.
package awsqtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/webordinary/webordinary/internal/awstest"
	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/awsq"
)

// DynamoDB chooses the DynamoDB emulator.
type DynamoDB int

const (
	// Dynalite is fast and needs only node (no TTL, which awsq does not use, and no
	// transactions: Config sets awsq.Config.NoTransactions for it).
	Dynalite DynamoDB = iota
	// DynamoDBLocal is AWS's own emulator (Java; skipped where it cannot run).
	DynamoDBLocal
)

// Options tune the backend under test.
type Options struct {
	DynamoDB DynamoDB
	// Config is the starting configuration; endpoints, Prefix and Create are filled in, and
	// zero timings get test defaults (2s claim ack wait, 2s long polls).
	Config awsq.Config
}

// Config returns a configuration for a fresh backend on the emulators, or skips t where they
// are not installed (fails under CI).
func Config(t testing.TB, opts Options) awsq.Config {
	t.Helper()
	cfg := opts.Config
	sqs := awstest.FauxQS(t)
	ddb := awstest.Dynalite
	if opts.DynamoDB == DynamoDBLocal {
		ddb = awstest.DynamoDBLocal
	} else {
		cfg.NoTransactions = true
	}
	cfg.DynamoDBEndpoint = ddb(t)
	cfg.SQSEndpoint, cfg.S3Endpoint = sqs, sqs
	cfg.Region, cfg.Create = "us-east-1", true
	cfg.Prefix = Prefix()
	if cfg.ClaimAckWait == 0 {
		cfg.ClaimAckWait = 2 * time.Second
	}
	if cfg.PollWait == 0 {
		cfg.PollWait = 2 * time.Second
	}
	return cfg
}

// New returns a fresh backend on the emulators, closed when t ends.
func New(t testing.TB, opts Options) *broker.Backend {
	t.Helper()
	return Open(t, Config(t, opts))
}

// Open returns the backend of cfg, closed when t ends.
func Open(t testing.TB, cfg awsq.Config) *broker.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := awsq.New(ctx, cfg)
	if err != nil {
		t.Fatalf("awsq backend: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// Prefix returns a fresh resource prefix: "t" and 10 hex digits.
func Prefix() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:])
}

// Clients are raw SDK clients on the same emulators as a Config, for tests that reach under
// the adapter (delete a queue, list a bucket).
type Clients struct {
	SQS      *sqs.Client
	DynamoDB *dynamodb.Client
	S3       *s3.Client
}

// ClientsOf returns raw clients for cfg's endpoints.
func ClientsOf(cfg awsq.Config) Clients {
	ac := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
	return Clients{
		SQS:      sqs.NewFromConfig(ac, func(o *sqs.Options) { o.BaseEndpoint = aws.String(cfg.SQSEndpoint) }),
		DynamoDB: dynamodb.NewFromConfig(ac, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(cfg.DynamoDBEndpoint) }),
		S3: s3.NewFromConfig(ac, func(o *s3.Options) {
			o.BaseEndpoint = aws.String(cfg.S3Endpoint)
			o.UsePathStyle = true
		}),
	}
}
