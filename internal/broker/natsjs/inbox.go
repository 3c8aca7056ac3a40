package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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

	mu    sync.Mutex
	peeks map[tenant.ID]peek // the first message each count read, for the next Open (see peeked)
}

// peek is a tenant's first message as a count (Pending) read it, and when.
type peek struct {
	msg directMsg
	at  time.Time
}

// peekFor bounds how long a count's read stands in for a queue's first read: a worker counts
// the tenant's jobs before it takes the lease, then opens the queue.
const peekFor = time.Second

// maxPeeks bounds inbox.peeks; past it the map starts over.
const maxPeeks = 1024

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
	_ = in.a.nc.Publish(wakeSubject(job.Tenant), nil) // stored: an owner waiting for it reads again
	return nil
}

func (in *inbox) Pending(ctx context.Context, t tenant.ID) (int, error) {
	sh := in.a.shardOf(t)
	subj := sh.subject + t.Subject()
	if n, first, ok := directPending(ctx, in.a.nc, sh, subj); ok {
		in.peeked(t, first)
		return n, nil
	}
	info, err := sh.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		return 0, ctxErr(ctx, fmt.Errorf("natsjs: pending %s: %w", t, err))
	}
	return int(info.State.Subjects[subj]), nil
}

// directPending counts subj's messages with one direct get (its first message says how many
// follow): two of a claim's API requests were these counts. ok is false when it cannot tell
// (more replicas, or a stream without direct gets, set so by an older binary): the caller
// asks the stream's info, from its leader: a count that misses a job just published would
// leave it unclaimed (a release reads the count to ask for a claim). first is the message
// the count read (nil when none).
func directPending(ctx context.Context, nc *nats.Conn, sh shard, subj string) (n int, first *directMsg, ok bool) {
	if !sh.direct() {
		return 0, nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second) // as the JetStream client's default
	defer cancel()
	seq, m, behind, err := sh.firstDirect(ctx, nc, subj, 1)
	switch {
	case err != nil || m != nil && behind < 0:
		return 0, nil, false
	case m == nil:
		return 0, nil, true
	}
	return behind + 1, &directMsg{seq: seq, m: m, behind: behind}, true
}

// peeked keeps the first message a count of t's jobs read (none: forgets t's), so the queue
// the worker opens next, once it took the lease, starts from it rather than reading it again
// (see takePeek).
func (in *inbox) peeked(t tenant.ID, first *directMsg) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if first == nil {
		delete(in.peeks, t)
		return
	}
	if in.peeks == nil || len(in.peeks) >= maxPeeks {
		in.peeks = map[tenant.ID]peek{}
	}
	in.peeks[t] = peek{msg: *first, at: time.Now()}
}

// takePeek returns, once, the first message of t's that a count read less than peekFor ago.
// It stands in for a queue's first read as a read ahead does (see queue.readAhead): it is the
// tenant's first message at or after any later cursor but for those removed since, and only
// an owner removes them, those it acknowledged: a previous owner's, removed between the count
// and the lease's acquisition (it held the lease then), is delivered again and re-settled from
// its final record, as after a lost removal.
func (in *inbox) takePeek(t tenant.ID) (directMsg, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	p, ok := in.peeks[t]
	delete(in.peeks, t)
	return p.msg, ok && time.Since(p.at) < peekFor
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
	msgs, err := readAll(ctx, in.a.dlq, subjDLQ+t.Subject())
	if err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("natsjs: dead letters %s: %w", t, err))
	}
	out := make([]broker.DeadLetter, 0, len(msgs))
	for _, m := range msgs {
		var dl broker.DeadLetter
		if json.Unmarshal(m.Data, &dl) == nil {
			out = append(out, dl)
		}
	}
	return out, nil
}

func (in *inbox) RemoveDeadLetter(ctx context.Context, t tenant.ID, jobID string) error {
	msgs, err := readAll(ctx, in.a.dlq, subjDLQ+t.Subject())
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("natsjs: dead letters %s: %w", t, err))
	}
	for _, m := range msgs {
		var dl broker.DeadLetter
		if json.Unmarshal(m.Data, &dl) != nil || dl.Job.ID != jobID {
			continue
		}
		err := in.a.dlq.DeleteMsg(ctx, m.Sequence)
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return ctxErr(ctx, fmt.Errorf("natsjs: remove dead letter %s: %w", jobID, err))
		}
	}
	return nil
}

// readAll reads every message on subject, without a consumer (see scan).
func readAll(ctx context.Context, s jetstream.Stream, subject string) ([]*jetstream.RawStreamMsg, error) {
	var out []*jetstream.RawStreamMsg
	err := scan(ctx, s, subject, 1, math.MaxUint64, func(m *jetstream.RawStreamMsg) { out = append(out, m) })
	return out, err
}

// scan calls fn with each message on subject (wildcards allowed) stored between stream
// sequences from and last, in order. It asks for one message at a time (a direct get when
// the stream allows them, next by subject) rather than through a consumer: a consumer per
// read outlives it on the engine (an ordered one until its inactivity threshold), and reads
// that are polled (status, the dashboard) would pile them up to the engine's limit.
func scan(ctx context.Context, s jetstream.Stream, subject string, from, last uint64, fn func(*jetstream.RawStreamMsg)) error {
	for seq := from; seq <= last && seq != 0; {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if m.Sequence > last {
			return nil
		}
		fn(m)
		seq = m.Sequence + 1
	}
	return nil
}

func wrap(op, id string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("natsjs: %s job %s: %w", op, id, err)
}
