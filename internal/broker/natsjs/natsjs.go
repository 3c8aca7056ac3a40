package natsjs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/retry"
)

// Names of the streams, buckets and subjects this adapter uses.
const (
	streamInbox   = "WO_IN"
	streamResults = "WO_RESULTS"
	streamDLQ     = "WO_DLQ"
	bucketLeases  = "wo_leases"
	bucketJobs    = "wo_jobs"
	bucketWorkers = "wo_workers"
	bucketClaims  = "wo_claims"

	subjInbox   = "wo.in."
	subjResults = "wo.out."
	subjDLQ     = "wo.dlq."
	subjSignals = "wo.sig."

	consumerResults = "router"
)

// Config tunes the adapter.
type Config struct {
	// Replicas for every stream and bucket (and the results consumer): 1 on a single
	// server, 3 on a cluster of three or more. 0 means: what the existing WO_IN stream has
	// (so a process that does not say never scales a cluster's streams down), else 3 when
	// the server is part of a cluster and 1 when it is not.
	Replicas int
	// EngineID is the id of the engine this process runs and is connected to in-process
	// (openEmbedded), if so: a result whose final record that engine stored, on one replica,
	// is not read back (see recordedHeader). Elsewhere only more replicas make it so.
	EngineID string
	// ClaimAckWait is how long a claim request handed out may stay unacknowledged before it is
	// waiting again. Default 5s.
	ClaimAckWait time.Duration
	// ResultAckWait is the same for results. Default 30s.
	ResultAckWait time.Duration
	// DedupWindow bounds idempotent Publish of jobs and results. Default 2m.
	DedupWindow time.Duration
	// JobRetention is how long job records are kept after their last update. Default
	// broker.JobRetention (30 days).
	JobRetention time.Duration
	// InboxShards is how many streams a new deployment's inbox is split over, by tenant
	// (WO_IN, WO_IN_1, …). A server writes and fsyncs each stream's messages one after
	// another, so one stream caps the accepted and finished jobs per second; shards write
	// in parallel. The results are split over as many streams (WO_RESULTS, WO_RESULTS_1, …),
	// a tenant's in the shard of its jobs. An existing deployment keeps the number recorded
	// on WO_IN (1 when it records none), so every process agrees on where a tenant's jobs
	// and results are. Default 16 on one replica, 4 on more (see defaultInboxShards).
	InboxShards int
	// Logger receives the backend's own logs (a claims watch that fell behind). Default
	// slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.ClaimAckWait == 0 {
		c.ClaimAckWait = 5 * time.Second
	}
	if c.ResultAckWait == 0 {
		c.ResultAckWait = 30 * time.Second
	}
	if c.DedupWindow == 0 {
		c.DedupWindow = 2 * time.Minute
	}
	if c.JobRetention == 0 {
		c.JobRetention = broker.JobRetention
	}
	c.InboxShards = min(max(c.InboxShards, 0), maxInboxShards) // 0: the default, once the replicas are known
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// New sets up (idempotently) every stream and bucket on nc's server and returns the backend.
// Close on the backend does not close nc.
func New(ctx context.Context, nc *nats.Conn, cfg Config) (*broker.Backend, error) {
	cfg = cfg.withDefaults()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("natsjs: %w", err)
	}
	a := &adapter{nc: nc, js: js, cfg: cfg}
	a.fences, a.settles = resultFences(a), settleFences(a)
	if err := a.setup(ctx); err != nil {
		return nil, err
	}
	cl := newClaims(a)
	jb := &jobs{kv: a.jobs, s: a.jobsStream, a: a}
	rs := newResults(a, jb)
	return &broker.Backend{
		Inbox:    &inbox{a: a, jobs: jb},
		Claims:   cl,
		Leases:   newLeases(a.leases, js, a.fences, a.settles),
		Results:  rs,
		Signals:  &signals{nc: nc},
		Jobs:     jb,
		Presence: &presence{a: a},
		Table:    a.table,
		Blobs:    newBlobOpener(a).open,
		Close:    func() error { cl.close(); rs.close(); return nil },
	}, nil
}

type adapter struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg Config

	inbox                   []shard       // by shardOf(tenant)
	results                 []resultShard // by shardIndex(tenant), as many as inbox
	dlq                     jetstream.Stream
	leaseShards             int          // the deployment's, see setupExisting
	leases                  []leaseShard // by shardIndex(tenant)
	jobs, workers, claimsKV jetstream.KeyValue
	jobsStream              jetstream.Stream // the stream under the jobs bucket
	fences                  *fences          // the tenants' fence keys in the results
	settles                 *fences          // the tenants' fence keys in the job records' stream
	finished                finishedJobs     // results this client published fenced (see delivery.fence)
}

func (a *adapter) setup(ctx context.Context) error {
	steps := []func(context.Context) error{a.setupExisting, a.setupStreams, a.setupConsumers, a.setupBuckets}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return fmt.Errorf("natsjs: setup: %w", err)
		}
	}
	return nil
}

// setupExisting reads what an existing deployment decided, from its WO_IN stream: the number
// of inbox shards and of lease shards (always), and the replicas when Config.Replicas is 0.
// Without WO_IN: the configured shards for both, and 3 replicas on a cluster, 1 on a single
// server.
func (a *adapter) setupExisting(ctx context.Context) error {
	s, err := settle(ctx, a, func(ctx context.Context) (jetstream.Stream, error) { return a.js.Stream(ctx, streamInbox) })
	switch {
	case err == nil:
		cfg := s.CachedInfo().Config
		if a.cfg.Replicas == 0 {
			a.cfg.Replicas = max(1, cfg.Replicas)
		}
		// The record on WO_IN, or the shard streams that exist, whichever says more: the record
		// is written first (a process starting while another sets up sees it before the
		// shards), and the shards outlast a lost record (an update of WO_IN without it, by an
		// older binary or by hand). Neither: a deployment from before shards, 1.
		a.cfg.InboxShards = 1
		if n, err := strconv.Atoi(cfg.Metadata[metaShards]); err == nil && n > 0 {
			a.cfg.InboxShards = n
		}
		n, err := a.existingShards(ctx)
		if err != nil {
			return err
		}
		a.cfg.InboxShards = max(a.cfg.InboxShards, n)
		// The same for the leases, whose record is on WO_IN too (a deployment from before
		// lease shards has none and keeps wo_leases alone, whatever its inbox shards).
		a.leaseShards = 1
		if n, err := strconv.Atoi(cfg.Metadata[metaLeaseShards]); err == nil && n > 0 {
			a.leaseShards = n
		}
		if n, err = a.existingLeaseShards(ctx); err != nil {
			return err
		}
		a.leaseShards = max(a.leaseShards, n)
	case errors.Is(err, jetstream.ErrStreamNotFound):
		if a.cfg.Replicas == 0 {
			a.cfg.Replicas = 1
			if a.nc.ConnectedClusterName() != "" {
				a.cfg.Replicas = 3
			}
		}
		if a.cfg.InboxShards == 0 {
			a.cfg.InboxShards = defaultInboxShards
			if a.cfg.Replicas > 1 {
				a.cfg.InboxShards = defaultClusterShards
			}
		}
		a.leaseShards = a.cfg.InboxShards
	default:
		return fmt.Errorf("stream %s: %w", streamInbox, err)
	}
	return nil
}

// existingShards counts the inbox's streams that exist: WO_IN and WO_IN_1, WO_IN_2, … up to
// the first missing one.
func (a *adapter) existingShards(ctx context.Context) (int, error) {
	n := 1
	for ; n < maxInboxShards; n++ {
		name := shardNamed(n).name
		_, err := settle(ctx, a, func(ctx context.Context) (jetstream.Stream, error) { return a.js.Stream(ctx, name) })
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("stream %s: %w", name, err)
		}
	}
	return n, nil
}

// existingLeaseShards counts the leases' buckets that exist: wo_leases and wo_leases_1, … up
// to the first missing one.
func (a *adapter) existingLeaseShards(ctx context.Context) (int, error) {
	n := 1
	for ; n < maxInboxShards; n++ {
		name := leaseBucketNamed(n)
		_, err := settle(ctx, a, func(ctx context.Context) (jetstream.KeyValue, error) { return a.js.KeyValue(ctx, name) })
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("bucket %s: %w", name, err)
		}
	}
	return n, nil
}

func (a *adapter) setupStreams(ctx context.Context) error {
	var err error
	r := a.cfg.Replicas
	a.inbox = make([]shard, a.cfg.InboxShards)
	for k := range a.inbox {
		sh := shardNamed(k)
		cfg := jetstream.StreamConfig{Name: sh.name, Subjects: []string{sh.subject + "*.*"},
			Retention: jetstream.WorkQueuePolicy, Duplicates: a.cfg.DedupWindow, Replicas: r,
			AllowDirect: true} // Pending reads it without the JetStream API (see directPending)
		if k == 0 {
			cfg.Metadata = map[string]string{metaShards: strconv.Itoa(a.cfg.InboxShards),
				metaLeaseShards: strconv.Itoa(a.leaseShards)}
		}
		if sh.Stream, err = a.stream(ctx, cfg); err != nil {
			return err
		}
		a.inbox[k] = sh
	}
	a.results = make([]resultShard, a.cfg.InboxShards)
	for k := range a.results {
		name, subject := resultShardNamed(k)
		a.results[k].subject = subject
		// Results, and each tenant's fence key (see fences). On one replica, whose only
		// server is its leader, a fence key is read with a direct get, served by the stream
		// itself, not by the server's JetStream API workers: every acquisition reads it. On
		// more, from the leader (a follower may answer from behind).
		s, err := a.stream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject + "*.*", subject + "f.*.*"},
			MaxAge: 7 * 24 * time.Hour, Duplicates: a.cfg.DedupWindow, Replicas: r, AllowDirect: r == 1})
		if err != nil {
			return err
		}
		a.results[k].stream = resultStream{s}
	}
	a.dlq, err = a.stream(ctx, jetstream.StreamConfig{Name: streamDLQ, Subjects: []string{subjDLQ + "*.*"},
		MaxAge: 30 * 24 * time.Hour, Replicas: r})
	return err
}

// settle runs create, which looks up, makes or updates a stream, bucket or consumer every
// process sets up. On a cluster, a request made before the cluster has elected its meta
// leader (members that start together) goes unanswered, and one made while too few servers
// are up to place its replicas is refused: create then gets attempts of at most 3 s, until
// one succeeds or fails otherwise, or settleFor (or ctx) ends. A retry finds what another
// process made.
func settle[T any](ctx context.Context, a *adapter, create func(context.Context) (T, error)) (T, error) {
	if a.nc.ConnectedClusterName() == "" {
		return create(ctx)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, settleFor)
	defer cancel()
	for attempt := 1; ; attempt++ {
		actx, acancel := context.WithTimeout(ctx, 3*time.Second)
		v, err := create(actx)
		acancel()
		if err == nil || !clusterNotReady(err) {
			return v, err
		}
		if ctx.Err() != nil {
			return v, fmt.Errorf("the cluster's JetStream not ready after %s (is a quorum of its servers up, enough for the replicas, and may this user use $JS.API.>?): %w",
				time.Since(start).Round(time.Second), err)
		}
		if attempt == 3 {
			a.cfg.Logger.WarnContext(ctx, "waiting for the cluster: its JetStream does not answer or cannot place the replicas yet", slog.Any("err", err))
		}
		_ = retry.Sleep(ctx, time.Duration(100+rand.IntN(500))*time.Millisecond) // ctx's end is told above, on the next try
	}
}

// settleFor bounds settle: long enough for members started by hand one after another.
const settleFor = 2 * time.Minute

// clusterNotReady: no answer (no meta leader yet), too few servers for the replicas, or a
// member not caught up yet ("temporarily unavailable").
func clusterNotReady(err error) bool {
	var api *jetstream.APIError
	return errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &api) && (api.ErrorCode == errCodeNoPeers || api.ErrorCode == errCodeInsufficientResources ||
			api.ErrorCode == errCodeTemporarilyUnavailable)
}

// JetStream's error codes a forming cluster answers with (clusterNotReady).
const (
	errCodeNoPeers               jetstream.ErrorCode = 10005
	errCodeInsufficientResources jetstream.ErrorCode = 10023
	// "JetStream system temporarily unavailable": a member not yet caught up with the meta
	// leader. TestEmbeddedEnginesFormACluster failed on it once at setup (WO_IN), under the
	// load of the package's other tests.
	errCodeTemporarilyUnavailable jetstream.ErrorCode = 10008
)

func (a *adapter) stream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := settle(ctx, a, func(ctx context.Context) (jetstream.Stream, error) { return a.js.CreateOrUpdateStream(ctx, cfg) })
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", cfg.Name, err)
	}
	return s, nil
}

func (a *adapter) setupConsumers(ctx context.Context) error {
	var err error
	for k := range a.results {
		sh := &a.results[k]
		cfg := jetstream.ConsumerConfig{
			Durable: consumerResults, AckPolicy: jetstream.AckExplicitPolicy, AckWait: a.cfg.ResultAckWait,
			MaxAckPending: 1000, MaxDeliver: -1, Replicas: a.cfg.Replicas,
			FilterSubject: sh.subject + "*.*", // not the fence keys
		}
		sh.consumer, err = settle(ctx, a, func(ctx context.Context) (jetstream.Consumer, error) {
			return sh.stream.CreateOrUpdateConsumer(ctx, cfg)
		})
		if err != nil {
			return fmt.Errorf("consumer %s on %s: %w", consumerResults, sh.stream.CachedInfo().Config.Name, err)
		}
	}
	return nil
}

func (a *adapter) setupBuckets(ctx context.Context) error {
	var err error
	r := a.cfg.Replicas
	a.leases = make([]leaseShard, a.leaseShards)
	for k := range a.leases {
		sh := leaseShard{bucket: leaseBucketNamed(k)}
		if sh.kv, err = a.bucket(ctx, jetstream.KeyValueConfig{Bucket: sh.bucket, History: 1,
			LimitMarkerTTL: time.Second, Replicas: r}); err != nil {
			return err
		}
		a.leases[k] = sh
	}
	if a.jobs, err = a.jobsBucket(ctx); err != nil {
		return err
	}
	// Presence is rebuilt by every worker's next heartbeat: memory is enough.
	if a.workers, err = a.bucket(ctx, jetstream.KeyValueConfig{Bucket: bucketWorkers, History: 1,
		LimitMarkerTTL: time.Second, Replicas: r, Storage: jetstream.MemoryStorage}); err != nil {
		return err
	}
	// Claim requests are hints (the lease is the truth) and the router re-requests claims for
	// every unowned tenant with pending jobs when it starts, so they live in memory: no fsync.
	a.claimsKV, err = a.bucket(ctx, jetstream.KeyValueConfig{Bucket: bucketClaims, History: 1,
		Replicas: r, Storage: jetstream.MemoryStorage})
	return err
}

// jobsBucket creates the job records bucket. Records are a view: the accepted job is in the
// inbox and its outcome in the results, both fsync'd, and the router rewrites a final record
// from its result. So on a single server the bucket's stream persists asynchronously
// (PersistMode async, which KeyValueConfig cannot set): record writes cost no fsync, leaving
// two synced writes per job (publish, result) and a share of its tenure's removal.
func (a *adapter) jobsBucket(ctx context.Context) (jetstream.KeyValue, error) {
	cfg := jetstream.StreamConfig{
		Name: "KV_" + bucketJobs, Subjects: []string{"$KV." + bucketJobs + ".>"},
		MaxMsgsPerSubject: 1, MaxBytes: -1, MaxMsgs: -1, MaxMsgSize: -1, MaxConsumers: -1,
		MaxAge: a.cfg.JobRetention, Duplicates: 2 * time.Minute, Storage: jetstream.FileStorage,
		Replicas: a.cfg.Replicas, AllowRollup: true, DenyDelete: true, AllowDirect: true,
		Discard: jetstream.DiscardNew,
	}
	if a.cfg.Replicas == 1 {
		cfg.PersistMode = jetstream.AsyncPersistMode
	}
	var err error
	if a.jobsStream, err = a.stream(ctx, cfg); err != nil {
		return nil, fmt.Errorf("bucket %s: %w", bucketJobs, err)
	}
	kv, err := settle(ctx, a, func(ctx context.Context) (jetstream.KeyValue, error) { return a.js.KeyValue(ctx, bucketJobs) })
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", bucketJobs, err)
	}
	return kv, nil
}

func (a *adapter) bucket(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := settle(ctx, a, func(ctx context.Context) (jetstream.KeyValue, error) { return a.js.CreateOrUpdateKeyValue(ctx, cfg) })
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}

// ctxErr returns ctx.Err() unwrapped when ctx ended, else err.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
	}
	return errors.Is(err, jetstream.ErrKeyExists)
}
