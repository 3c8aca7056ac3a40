package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

type inbox struct {
	a    *adapter
	jobs *jobs // the same client's records: see createdHeader
}

var _ broker.Inbox = (*inbox)(nil)

func (in *inbox) Publish(ctx context.Context, job broker.Job) error {
	data, err := json.Marshal(job)
	if err != nil {
		return fmt.Errorf("natsjs: encode job %s: %w", job.ID, err)
	}
	m := &nats.Msg{Subject: in.a.shardOf(job.Tenant).subject + job.Tenant.Subject(), Data: data, Header: nats.Header{}}
	if rev, ok := in.jobs.takeCreated(job.ID); ok {
		m.Header.Set(createdHeader, strconv.FormatUint(rev, 10))
	}
	_, err = in.a.js.PublishMsg(ctx, m, jetstream.WithMsgID(job.ID))
	if errors.Is(err, nats.ErrMaxPayload) {
		return fmt.Errorf("%w: the job with its attachments is %d MB; the engine accepts %d MB (send smaller attachments)",
			broker.ErrTooLarge, len(data)>>20, in.a.nc.MaxPayload()>>20)
	}
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("natsjs: publish job %s: %w", job.ID, err))
	}
	return nil
}

func consumerName(t tenant.ID) string { return "in_" + t.Name() }

// Open creates the tenant's consumer. A consumer left behind by a previous owner that still
// has a delivery in flight is replaced, so that delivery is available at once instead of
// after its AckWait.
func (in *inbox) Open(ctx context.Context, t tenant.ID, opts broker.QueueOptions) (broker.Queue, error) {
	if opts.AckWait == 0 {
		opts.AckWait = time.Minute
	}
	sh := in.a.shardOf(t)
	q := &queue{in: in, t: t, s: sh.Stream, cfg: jetstream.ConsumerConfig{
		Durable: consumerName(t), FilterSubject: sh.subject + t.Subject(),
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: opts.AckWait,
		MaxAckPending: 1, MaxDeliver: -1, InactiveThreshold: time.Hour,
		// The consumer's state need not survive a server restart: the stream keeps every
		// unacknowledged message and a new consumer delivers them again. Memory means no fsync.
		// A work queue's consumers must have its replicas.
		MemoryStorage: true, Replicas: in.a.cfg.Replicas,
	}}
	if err := q.open(ctx); err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("natsjs: open queue %s: %w", t, err))
	}
	return q, nil
}

// open creates the consumer, replacing one left with a delivery in flight.
func (q *queue) open(ctx context.Context) error {
	c, err := q.s.CreateOrUpdateConsumer(ctx, q.cfg)
	if err == nil && c.CachedInfo().NumAckPending > 0 {
		if err = q.s.DeleteConsumer(ctx, q.cfg.Durable); err == nil {
			c, err = q.s.CreateOrUpdateConsumer(ctx, q.cfg)
		}
	}
	if err != nil {
		return err
	}
	q.c, q.opened = c, createdAt(c)
	return nil
}

// reopen replaces the consumer, whose server no longer answers. A delete that gets no answer
// may still have happened (a consumer without a leader has no one to confirm it; seen on a
// cluster that lost a node, for as long as the test waited): the create is tried anyway, and
// succeeds once the old consumer is gone.
func (q *queue) reopen(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := q.s.DeleteConsumer(dctx, q.cfg.Durable)
	cancel()
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		q.in.a.cfg.Logger.WarnContext(ctx, "replace tenant consumer: delete not confirmed; creating anyway",
			slog.String("tenant", q.t.String()), slog.Any("err", err))
	}
	c, err := q.s.CreateOrUpdateConsumer(ctx, q.cfg)
	if err != nil {
		return err
	}
	q.c, q.opened = c, createdAt(c)
	return nil
}

func (in *inbox) Pending(ctx context.Context, t tenant.ID) (int, error) {
	sh := in.a.shardOf(t)
	subj := sh.subject + t.Subject()
	if n, ok := directPending(ctx, in.a.nc, sh, subj); ok {
		return n, nil
	}
	info, err := sh.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		return 0, ctxErr(ctx, fmt.Errorf("natsjs: pending %s: %w", t, err))
	}
	return int(info.State.Subjects[subj]), nil
}

// directPending counts subj's messages with one direct get (its first message, whose
// Nats-Num-Pending header says how many follow), served by the stream itself rather than
// by the server's JetStream API workers (two per core, shared by every consumer create and
// delete): two of a claim's API requests were these counts. Only on a stream with one
// replica, whose only server is its leader: a follower may answer a direct get from behind,
// and a count that misses a job just published would leave it unclaimed (a release reads
// the count to ask for a claim). ok is false when it cannot tell (a stream without direct
// gets, set so by an older binary): the caller asks the stream's info.
func directPending(ctx context.Context, nc *nats.Conn, sh shard, subj string) (n int, ok bool) {
	if cfg := sh.CachedInfo().Config; !cfg.AllowDirect || cfg.Replicas > 1 {
		return 0, false
	}
	req, _ := json.Marshal(map[string]any{"seq": 1, "next_by_subj": subj, "batch": 1})
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second) // as the JetStream client's default
	defer cancel()
	m, err := nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+sh.name, req)
	if err != nil {
		return 0, false
	}
	switch m.Header.Get("Status") {
	case "404":
		return 0, true
	case "":
		left, err := strconv.Atoi(m.Header.Get("Nats-Num-Pending"))
		if err != nil || m.Header.Get("Nats-Subject") != subj {
			return 0, false
		}
		return left + 1, true
	}
	return 0, false
}

// Tenants asks every shard at once. Shards that do not answer (one electing a leader after a
// cluster lost a node) leave the others' tenants to be returned, with broker.ErrPartial: the
// reconciler then serves those rather than none (TestTenantsOfTheShardsThatAnswer).
func (in *inbox) Tenants(ctx context.Context) (map[tenant.ID]int, error) {
	out := make(map[tenant.ID]int)
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		failed []error
	)
	for _, sh := range in.a.inbox {
		wg.Go(func() {
			info, err := sh.Info(ctx, jetstream.WithSubjectFilter(sh.subject+">"))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, fmt.Errorf("%s: %w", sh.name, err))
				return
			}
			for subj, n := range info.State.Subjects {
				t, err := tenant.ParseSubject(strings.TrimPrefix(subj, sh.subject))
				if err == nil && n > 0 {
					out[t] += int(n)
				}
			}
		})
	}
	wg.Wait()
	switch {
	case len(failed) == 0:
		return out, nil
	case len(failed) == len(in.a.inbox) || ctx.Err() != nil:
		return nil, ctxErr(ctx, fmt.Errorf("natsjs: tenants with pending jobs (%w)", errors.Join(failed...)))
	default:
		return out, fmt.Errorf("natsjs: tenants with pending jobs: %w (%w)", broker.ErrPartial, errors.Join(failed...))
	}
}

func (in *inbox) DeadLetters(ctx context.Context, t tenant.ID) ([]broker.DeadLetter, error) {
	msgs, err := readAll(ctx, in.a.js, streamDLQ, subjDLQ+t.Subject())
	if err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("natsjs: dead letters %s: %w", t, err))
	}
	out := make([]broker.DeadLetter, 0, len(msgs))
	for _, m := range msgs {
		var dl broker.DeadLetter
		if json.Unmarshal(m.Data(), &dl) == nil {
			out = append(out, dl)
		}
	}
	return out, nil
}

func (in *inbox) RemoveDeadLetter(ctx context.Context, t tenant.ID, jobID string) error {
	msgs, err := readAll(ctx, in.a.js, streamDLQ, subjDLQ+t.Subject())
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("natsjs: dead letters %s: %w", t, err))
	}
	for _, m := range msgs {
		var dl broker.DeadLetter
		meta, merr := m.Metadata()
		if json.Unmarshal(m.Data(), &dl) != nil || merr != nil || dl.Job.ID != jobID {
			continue
		}
		err := in.a.dlq.DeleteMsg(ctx, meta.Sequence.Stream)
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return ctxErr(ctx, fmt.Errorf("natsjs: remove dead letter %s: %w", jobID, err))
		}
	}
	return nil
}

// readAll reads every message on subject with an ordered consumer.
func readAll(ctx context.Context, js jetstream.JetStream, stream, subject string) ([]jetstream.Msg, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return nil, err
	}
	n := int(info.State.Subjects[subject])
	if n == 0 {
		return nil, nil
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return nil, err
	}
	var out []jetstream.Msg
	for len(out) < n {
		batch, err := c.Fetch(n-len(out), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, err
		}
		before := len(out)
		for m := range batch.Messages() {
			out = append(out, m)
		}
		if len(out) == before {
			break
		}
	}
	return out, nil
}

type queue struct {
	in  *inbox
	t   tenant.ID
	s   jetstream.Stream // the tenant's shard
	cfg jetstream.ConsumerConfig
	c   jetstream.Consumer
	// opened is when c was made (by anyone: Open finds a consumer a previous owner left):
	// a consumer younger than reachableWithin that no server answers for is not replaced
	// (TestAPullWaitsForAConsumerNotYetReachable); an older one is.
	opened time.Time
}

// reachableWithin is how long a new consumer may take to be reachable from every server:
// on a cluster that lost a node, a new consumer may wait out a whole election (up to 9 s).
// One replaced sooner started another wait (a job done 28 s after the kill).
const reachableWithin = 10 * time.Second

// createdAt is when c was made, as its server says; now when it does not say (or says later).
// A server whose clock is behind this machine's by more than reachableWithin makes every
// consumer look old: one that does not answer yet is replaced at once, as before the wait.
func createdAt(c jetstream.Consumer) time.Time {
	now := time.Now()
	if at := c.CachedInfo().Created; !at.IsZero() && at.Before(now) {
		return at
	}
	return now
}

func (q *queue) Next(ctx context.Context, wait time.Duration) (broker.Delivery, error) {
	m, err := fetchOne(ctx, q.c, wait)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted):
		// The server restarted and lost the in-memory consumer; the messages are still there.
		// Still an error when the new one is made: the caller's next Next says whether it works
		// (an owner counts failing Nexts to give up a tenant it cannot read).
		if oerr := q.open(ctx); oerr != nil {
			err = errors.Join(err, oerr)
		}
	case errors.Is(err, nats.ErrNoResponders) && time.Since(q.opened) < reachableWithin:
		// Made a moment ago: the cluster has not yet told every server where it lives.
		err = broker.ErrNoMessage
	case errors.Is(err, nats.ErrNoResponders):
		// No leader for the consumer (a cluster lost a node): a new consumer is placed on the
		// servers that are up, rather than waiting out its election.
		if rerr := q.reopen(ctx); rerr != nil {
			err = errors.Join(err, rerr)
		} else {
			err = fmt.Errorf("%w (consumer replaced)", err)
		}
	}
	if err != nil {
		if errors.Is(err, broker.ErrNoMessage) || ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("natsjs: next job for %s: %w", q.t, err)
	}
	d, err := newDelivery(q, m)
	if err != nil {
		_ = m.Term() // undecodable: it could never run, and would pin its owner forever
		return nil, broker.ErrNoMessage
	}
	return d, nil
}

func (q *queue) Close(ctx context.Context) error {
	err := q.s.DeleteConsumer(ctx, consumerName(q.t))
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return ctxErr(ctx, fmt.Errorf("natsjs: close queue %s: %w", q.t, err))
	}
	return nil
}

type delivery struct {
	q       *queue
	m       jetstream.Msg
	job     broker.Job
	attempt int
	behind  int
}

func newDelivery(q *queue, m jetstream.Msg) (*delivery, error) {
	d := &delivery{q: q, m: m, attempt: 1, behind: -1}
	if meta, err := m.Metadata(); err == nil {
		d.attempt, d.behind = int(meta.NumDelivered), int(meta.NumPending)
	}
	if err := json.Unmarshal(m.Data(), &d.job); err != nil {
		return d, fmt.Errorf("natsjs: undecodable job on %s: %w", m.Subject(), err)
	}
	if rev, err := strconv.ParseUint(m.Headers().Get(createdHeader), 10, 64); err == nil && rev > 0 {
		q.in.jobs.seed(d.job, rev)
	}
	return d, nil
}

func (d *delivery) Job() broker.Job { return d.job }
func (d *delivery) Attempt() int    { return d.attempt }
func (d *delivery) Behind() int     { return d.behind }

func (d *delivery) Extend(ctx context.Context) error {
	return ctxErr(ctx, wrap("extend", d.job.ID, d.m.InProgress()))
}

// Ack does not wait for the server's confirmation: a lost ack means a redelivery, which the
// worker settles idempotently from the job's final record.
func (d *delivery) Ack(ctx context.Context) error {
	err := d.m.Ack()
	if errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
		return nil
	}
	return ctxErr(ctx, wrap("ack", d.job.ID, err))
}

func (d *delivery) Retry(ctx context.Context, delay time.Duration) error {
	return ctxErr(ctx, wrap("retry", d.job.ID, d.m.NakWithDelay(delay)))
}

func (d *delivery) DeadLetter(ctx context.Context, reason string) error {
	data, _ := json.Marshal(broker.DeadLetter{Job: d.job, Reason: reason, At: time.Now()})
	_, err := d.q.in.a.js.Publish(ctx, subjDLQ+d.q.t.Subject(), data, jetstream.WithMsgID("dlq-"+d.job.ID))
	if err != nil {
		return ctxErr(ctx, wrap("dead-letter", d.job.ID, err))
	}
	return d.Ack(ctx)
}

func wrap(op, id string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("natsjs: %s job %s: %w", op, id, err)
}
