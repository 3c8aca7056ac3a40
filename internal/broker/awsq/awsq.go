package awsq

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/webordinary/webordinary/internal/awserr"
	"github.com/webordinary/webordinary/internal/broker"
)

// Defaults and limits.
const (
	// DefaultPrefix names every queue, table and bucket of an installation.
	DefaultPrefix = "wo"
	// DefaultPollWait is the long-poll wait of every receive (SQS's maximum).
	DefaultPollWait = 20 * time.Second
	// DefaultWaitingCache is how long a Claims.Waiting answer is reused: the worker pool asks
	// every 50 ms, and each uncached answer is a billed GetQueueAttributes call.
	DefaultWaitingCache = time.Second
	// DefaultMaxPayload is the largest message body sent through SQS itself; larger jobs and
	// results go to S3 and SQS carries a reference (SQS's default limit is 256 KiB).
	DefaultMaxPayload = 200 * 1024
	// DefaultMaxMessage is the largest job or result accepted at all (JSON-encoded, through
	// S3): the same 64 MB as the other backends, so a job is refused alike everywhere.
	DefaultMaxMessage = 64 << 20
	// maxQueueName is SQS's limit on queue names, ".fifo" included.
	maxQueueName = 80
)

// prefixPattern keeps every derived name valid for SQS, DynamoDB and S3, and short enough that a
// tenant queue name keeps room for the tenant.
var prefixPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,23}$`)

// Config tunes the adapter.
type Config struct {
	// Prefix names the installation's resources: queues "<prefix>-…", tables "<prefix>_…",
	// bucket "<prefix>-payloads". ^[a-z0-9][a-z0-9-]{0,23}$. Default "wo".
	Prefix string
	// Region is the AWS region. Default: the SDK's (AWS_REGION), else us-east-1.
	Region string
	// Endpoint, when set, is used for SQS, DynamoDB and S3 alike (an emulator); the
	// service-specific fields below override it. Credentials default to static test ones
	// when an endpoint is set and the environment has none.
	Endpoint         string
	SQSEndpoint      string
	DynamoDBEndpoint string
	S3Endpoint       string
	// Bucket holds payloads too large for SQS (under inbox/ and results/) and the blob
	// stores (under blobs/<store>/: agent state, engine previews). Default "<prefix>-payloads".
	Bucket string
	// Create makes missing tables, shared queues and the bucket at New (development and
	// tests; production resources come from infrastructure code). Tenant queues are always
	// created on first use.
	Create bool
	// ClaimAckWait is how long a received claim request may stay unacknowledged before it is
	// delivered again. Whole seconds. Default 5s.
	ClaimAckWait time.Duration
	// ResultAckWait is the same for results. Default 30s.
	ResultAckWait time.Duration
	// PollWait is the long-poll wait of receives, 1–20 s. Default 20s. Shorter means more
	// billed calls at idle; Close waits for outstanding polls up to this long.
	PollWait time.Duration
	// WaitingCache is how long a Claims.Waiting answer is reused. Default 1s; at least 1s.
	WaitingCache time.Duration
	// ExpiryPoll is how often Leases.Expired looks for leases that ran out. Default 1s.
	ExpiryPoll time.Duration
	// ClockSkew is the allowance for clock differences between processes: a lease counts as
	// gone for others only ClockSkew after its holder must have stopped. Default 100ms.
	ClockSkew time.Duration
	// SweepAfter is how long a publish may stay half done (sent, not yet counted) before
	// Tenants looks into the queue for a message it left uncounted. Default 30s.
	SweepAfter time.Duration
	// MaxPayload is the largest body sent through SQS itself. Default 200 KiB.
	MaxPayload int
	// MaxMessage is the largest job or result accepted (larger: broker.ErrTooLarge). Default
	// 64 MB.
	MaxMessage int
	// AWS, when set, is the SDK configuration to use instead of loading the default one.
	AWS *aws.Config
	// APIOptions are added to every client's middleware stack (metrics, call counting).
	APIOptions []func(*middleware.Stack) error
	// Logger receives the adapter's warnings. Default: slog.Default().
	Logger *slog.Logger

	// NoTransactions is for DynamoDB emulators without TransactWriteItems (dynalite): a lease
	// holder's record updates and settles are then fenced by reading the lease just before
	// them, not by a condition on it in the same step. Never set it on AWS.
	NoTransactions bool

	// faults, in tests, is called at named points between the steps of publish and ack; an
	// error it returns stops the operation there, as a crash would.
	faults func(point string) error
}

func (c Config) withDefaults() Config {
	c.Prefix = cmp.Or(c.Prefix, DefaultPrefix)
	c.Bucket = cmp.Or(c.Bucket, c.Prefix+"-payloads")
	c.SQSEndpoint = cmp.Or(c.SQSEndpoint, c.Endpoint)
	c.DynamoDBEndpoint = cmp.Or(c.DynamoDBEndpoint, c.Endpoint)
	c.S3Endpoint = cmp.Or(c.S3Endpoint, c.Endpoint)
	c.ClaimAckWait = cmp.Or(c.ClaimAckWait, 5*time.Second)
	c.ResultAckWait = cmp.Or(c.ResultAckWait, 30*time.Second)
	c.PollWait = cmp.Or(c.PollWait, DefaultPollWait)
	c.WaitingCache = max(c.WaitingCache, DefaultWaitingCache)
	c.ExpiryPoll = cmp.Or(c.ExpiryPoll, time.Second)
	c.ClockSkew = cmp.Or(c.ClockSkew, 100*time.Millisecond)
	c.SweepAfter = cmp.Or(c.SweepAfter, 30*time.Second)
	c.MaxPayload = cmp.Or(c.MaxPayload, DefaultMaxPayload)
	c.MaxMessage = cmp.Or(c.MaxMessage, DefaultMaxMessage)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	if !prefixPattern.MatchString(c.Prefix) {
		return fmt.Errorf("awsq: prefix %q: use 1–24 lowercase letters, digits and dashes, starting with a letter or digit (%s)", c.Prefix, prefixPattern)
	}
	if c.PollWait < time.Second || c.PollWait > 20*time.Second {
		return fmt.Errorf("awsq: PollWait %v must be between 1s and 20s (SQS long polls)", c.PollWait)
	}
	if c.ClaimAckWait < time.Second || c.ResultAckWait < time.Second {
		return fmt.Errorf("awsq: ClaimAckWait and ResultAckWait must be at least 1s (SQS visibility is in whole seconds)")
	}
	if c.MaxPayload > 256*1024 {
		return fmt.Errorf("awsq: MaxPayload %d is above SQS's 256 KiB", c.MaxPayload)
	}
	if c.ClockSkew < 0 {
		return fmt.Errorf("awsq: ClockSkew %v must not be negative: others would take a lease over before its holder stops", c.ClockSkew)
	}
	return nil
}

// adapter holds the clients and the state every port shares.
type adapter struct {
	cfg     Config
	sqs     *sqs.Client
	ddb     *dynamodb.Client
	s3      *s3.Client
	process string // this backend instance's id (its signal queue)
	names   names

	urls sync.Map // queue name → URL

	// halted is set by Close: from then on every AWS call fails with errClosed (as a closed
	// NATS connection's would), except Close's own giving back (calls on windDown contexts).
	halted atomic.Bool

	mu        sync.Mutex
	closed    bool
	receivers []*receiver
	polls     sync.WaitGroup // detached receives still outstanding
	bg        context.Context
	stopBg    context.CancelFunc
}

// New connects to SQS, DynamoDB and S3 (creating missing resources when cfg.Create) and
// returns the backend. Close it to stop its receives; the data stays.
func New(ctx context.Context, cfg Config) (*broker.Backend, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	a, err := newAdapter(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Create {
		if err := a.setup(ctx); err != nil {
			return nil, err
		}
	}
	if cfg.DynamoDBEndpoint != "" && !cfg.NoTransactions {
		a.probeTransactions(ctx)
	}
	return a.backend(), nil
}

// probeTransactions sets NoTransactions, with a warning, when the DynamoDB at a custom
// endpoint (an emulator) does not know TransactWriteItems. AWS always does.
func (a *adapter) probeTransactions(ctx context.Context) {
	_, err := a.ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []dtypes.TransactWriteItem{
		{ConditionCheck: &dtypes.ConditionCheck{TableName: aws.String(a.names.leases), Key: key("#probe", noSK),
			ConditionExpression: aws.String("attribute_not_exists(pk)")}},
	}})
	if awserr.HasCode(err, "UnknownOperationException") {
		a.cfg.NoTransactions = true
		a.cfg.Logger.WarnContext(ctx, "the DynamoDB at this endpoint has no transactions: a lease holder's writes are fenced by reading the lease first",
			slog.String("endpoint", a.cfg.DynamoDBEndpoint))
	}
}

func newAdapter(ctx context.Context, cfg Config) (*adapter, error) {
	ac, err := loadAWS(ctx, cfg)
	if err != nil {
		return nil, err
	}
	a := &adapter{cfg: cfg, process: randomID(), names: newNames(cfg.Prefix)}
	a.bg, a.stopBg = context.WithCancel(context.Background())
	apiOptions := append([]func(*middleware.Stack) error{a.refuseWhenHalted}, cfg.APIOptions...)
	a.sqs = sqs.NewFromConfig(ac, func(o *sqs.Options) {
		setEndpoint(&o.BaseEndpoint, cfg.SQSEndpoint)
		o.APIOptions = append(o.APIOptions, apiOptions...)
	})
	a.ddb = dynamodb.NewFromConfig(ac, func(o *dynamodb.Options) {
		setEndpoint(&o.BaseEndpoint, cfg.DynamoDBEndpoint)
		o.APIOptions = append(o.APIOptions, apiOptions...)
		o.DisableValidateResponseChecksum = cfg.DynamoDBEndpoint != "" // DynamoDB Local's CRCs differ
	})
	a.s3 = s3.NewFromConfig(ac, func(o *s3.Options) {
		setEndpoint(&o.BaseEndpoint, cfg.S3Endpoint)
		o.UsePathStyle = cfg.S3Endpoint != ""
		o.APIOptions = append(o.APIOptions, apiOptions...)
	})
	return a, nil
}

// windDown marks the contexts of Close's own calls, which run after halted is set.
type windDown struct{}

// refuseWhenHalted fails every call made after Close began, but Close's own.
func (a *adapter) refuseWhenHalted(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("wo-halted",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if a.halted.Load() && ctx.Value(windDown{}) == nil {
				return middleware.InitializeOutput{}, middleware.Metadata{}, errClosed
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
}

func setEndpoint(dst **string, endpoint string) {
	if endpoint != "" {
		*dst = aws.String(endpoint)
	}
}

// loadAWS returns cfg.AWS or the SDK's default configuration for cfg.Region.
func loadAWS(ctx context.Context, cfg Config) (aws.Config, error) {
	if cfg.AWS != nil {
		return *cfg.AWS, nil
	}
	var opts []func(*awsconfig.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	if cfg.SQSEndpoint+cfg.DynamoDBEndpoint+cfg.S3Endpoint != "" && os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	ac, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("awsq: load the AWS configuration: %w", err)
	}
	if ac.Region == "" {
		ac.Region = "us-east-1"
	}
	return ac, nil
}

func (a *adapter) backend() *broker.Backend {
	return &broker.Backend{
		Inbox:    &inbox{a: a},
		Claims:   newClaims(a),
		Leases:   newLeases(a),
		Results:  a.results(),
		Signals:  newSignals(a),
		Jobs:     a.jobs(),
		Presence: &presence{a: a},
		Table:    a.table,
		Blobs:    a.blobs,
		Close:    a.close,
	}
}

// results is the results queue: fenced publishes where DynamoDB has transactions.
func (a *adapter) results() broker.Results {
	if a.cfg.NoTransactions {
		return newResults(a)
	}
	return txResults{newResults(a)}
}

// jobs is the records store: fenced updates where DynamoDB has transactions.
func (a *adapter) jobs() broker.Jobs {
	if a.cfg.NoTransactions {
		return &jobs{a: a}
	}
	return txJobs{&jobs{a: a}}
}

// close stops every receiver, gives back what they held, and waits (at most a poll's length)
// for receives still outstanding, so nothing is left invisible by this process.
func (a *adapter) close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	a.halted.Store(true)
	rs := a.receivers
	a.mu.Unlock()
	for _, r := range rs {
		r.close()
	}
	done := make(chan struct{})
	go func() { a.polls.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(a.cfg.PollWait + 5*time.Second):
	}
	a.deleteSignalQueue()
	a.stopBg()
	return nil
}

// deleteSignalQueue removes this process's signal queue, if it made one: nobody else reads it.
func (a *adapter) deleteSignalQueue() {
	u, ok := a.urls.Load(a.names.signalQueue(a.process))
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithValue(a.bg, windDown{}, true), 10*time.Second)
	defer cancel()
	if _, err := a.sqs.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u.(string))}); err != nil {
		a.cfg.Logger.Warn("awsq: delete the signal queue", "err", err)
	}
}

// register adds r to the receivers Close stops; false when the backend is closed.
func (a *adapter) register(r *receiver) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	a.receivers = append(a.receivers, r)
	return true
}

func (a *adapter) unregister(r *receiver) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, x := range a.receivers {
		if x == r {
			a.receivers = append(a.receivers[:i], a.receivers[i+1:]...)
			return
		}
	}
}

// fault runs the test hook at point.
func (a *adapter) fault(point string) error {
	if a.cfg.faults == nil {
		return nil
	}
	return a.cfg.faults(point)
}

// errClosed is returned by calls on a closed backend or queue.
var errClosed = errors.New("awsq: closed")

// ctxErr returns ctx.Err() unwrapped when ctx ended (the SDK wraps cancellation), else err.
func ctxErr(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func randomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func nowMs() int64 { return time.Now().UnixMilli() }
