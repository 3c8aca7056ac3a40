package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// recordedHeader on a result published fenced names the server that acknowledged the job's
// final record with that result, written by the same client under the same lease just
// before. The router need not read the record back (resultDelivery.Recorded) when a quorum
// stored it (more than one replica), or when that server is the engine running in the
// router's own process (Config.EngineID), alone: the records persist asynchronously on a
// single server, and only a crash of that engine, which the router does not outlive, can
// lose the write. A result re-read after a restart names an engine that is gone (ids are new
// at every start), and any other server may be a leaf or a cluster member that does not
// hold the records, or restart behind the router's back: the record is read.
const recordedHeader = "Wo-Recorded-On"

// results publishes to the tenant's result shard and reads every shard: a goroutine per
// shard, from the first Next to Close, pulls the router's consumer there and hands each
// result over when Next asks (results are fetched ahead by up to resultBatch per shard).
type results struct {
	a      *adapter
	jobs   *jobs // this client's fenced record writes (recordedHeader)
	start  sync.Once
	next   chan fetched // unbuffered: a shard's result waits for a Next
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type fetched struct {
	d   broker.ResultDelivery
	err error
}

func newResults(a *adapter, jb *jobs) *results {
	ctx, cancel := context.WithCancel(context.Background())
	return &results{a: a, jobs: jb, next: make(chan fetched), ctx: ctx, cancel: cancel}
}

// resultStream is a result shard's stream. On one replica it serves direct gets, and the
// tenants' fence keys in it are read with one (see setupStreams); when a read finds no one
// serving them (an older binary's setup, which does not ask for them, turned them off since),
// the stream's info is read again and the read asked again, of the leader.
type resultStream struct{ jetstream.Stream }

func (s resultStream) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	m, err := s.Stream.GetLastMsgForSubject(ctx, subject)
	if !errors.Is(err, nats.ErrNoResponders) || !s.CachedInfo().Config.AllowDirect {
		return m, err
	}
	if _, ierr := s.Info(ctx); ierr != nil {
		return nil, err
	}
	return s.Stream.GetLastMsgForSubject(ctx, subject)
}

var (
	_ broker.Results       = (*results)(nil)
	_ broker.FencedResults = (*results)(nil)
)

func (r *results) Publish(ctx context.Context, res broker.Result) error {
	data, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("natsjs: encode result %s: %w", res.JobID, err)
	}
	sh := r.a.results[shardIndex(res.Tenant, len(r.a.results))]
	_, err = r.a.js.Publish(ctx, sh.subject+res.Tenant.Subject(), data, jetstream.WithMsgID("result-"+res.JobID))
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("natsjs: publish result %s: %w", res.JobID, err))
	}
	return nil
}

// PublishFenced publishes res on the condition that t's fence key is still the one carrying
// token (see fences); a changed key is read again once: a newer token refuses the result.
func (r *results) PublishFenced(ctx context.Context, t tenant.ID, token uint64, res broker.Result) error {
	data, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("natsjs: encode result %s: %w", res.JobID, err)
	}
	sh := r.a.results[shardIndex(t, len(r.a.results))]
	for try := range 2 {
		m, err := r.a.fences.mark(ctx, t, token, try > 0)
		if err != nil {
			return err
		}
		msg := &nats.Msg{Subject: sh.subject + t.Subject(), Data: data}
		if on := r.jobs.recordedOn(res.JobID, t, token); on != "" {
			msg.Header = nats.Header{recordedHeader: []string{on}}
		}
		ack, err := r.a.js.PublishMsg(ctx, msg, jetstream.WithMsgID("result-"+res.JobID),
			jetstream.WithExpectLastSequenceForSubject(m.seq, sh.fenceSubject(t)))
		if isWrongLastSeq(err) {
			continue
		}
		if err != nil {
			return ctxErr(ctx, fmt.Errorf("natsjs: publish result %s: %w", res.JobID, err))
		}
		if !ack.Duplicate { // a cluster answers a duplicate before it checks the fence
			r.a.finished.add(res.JobID, token)
		}
		return nil
	}
	return fmt.Errorf("natsjs: publish result %s: the fence of %s keeps changing; try again", res.JobID, t)
}

// Next returns the next result of any shard; an error of one shard's pull is returned as it
// comes (the caller waits before asking again; the other shards' results are not held up).
func (r *results) Next(ctx context.Context) (broker.ResultDelivery, error) {
	r.start.Do(func() {
		for _, sh := range r.a.results {
			r.wg.Go(func() { r.pull(sh.consumer) })
		}
	})
	select {
	case f := <-r.next:
		return f.d, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-r.ctx.Done():
		return nil, fmt.Errorf("natsjs: next result: the backend is closed")
	}
}

// pull hands c's results to Next until Close. It keeps up to resultBatch results pulled
// ahead (the consumer's continuous pull: one pull request per batch, not per result, which
// was a request and a reply on both sides for every job) and hands each over as Next asks.
// At Close the pull is drained, and the results it had fetched are given back once it no
// longer listens (delivered again at once, to this router's successor or another).
func (r *results) pull(c jetstream.Consumer) {
	for r.ctx.Err() == nil {
		it, err := c.Messages(jetstream.PullMaxMessages(resultBatch), jetstream.PullExpiry(resultWait))
		if err != nil {
			if !r.hand(fetched{err: fmt.Errorf("natsjs: next result: %w", err)}) {
				return
			}
			continue
		}
		// Close drains the pull; a drained pull's Next returns once its requests end, which
		// should be within resultWait, and is cut off a second after that in any case.
		grace, endGrace := context.WithCancel(context.Background())
		stop := context.AfterFunc(r.ctx, func() {
			it.Drain()
			time.AfterFunc(resultWait+time.Second, endGrace)
		})
		held := r.serve(it, grace)
		stop()
		endGrace()
		if r.ctx.Err() != nil {
			giveBack(it, held)
			return
		}
		it.Stop() // it failed: pull afresh
	}
}

// serve hands it's results to Next until it fails or Close drains it (waiting for the drain
// until grace ends); it returns the result Close kept from Next, if any.
func (r *results) serve(it jetstream.MessagesContext, grace context.Context) jetstream.Msg {
	for {
		m, err := it.Next(jetstream.NextContext(grace))
		switch {
		case err == nil:
		case r.ctx.Err() != nil, errors.Is(err, jetstream.ErrMsgIteratorClosed):
			return nil
		default:
			r.hand(fetched{err: fmt.Errorf("natsjs: next result: %w", err)})
			return nil
		}
		d, err := r.decodeResult(m)
		if err != nil {
			_ = m.Term() // it can never be served
			continue
		}
		if !r.hand(fetched{d: d}) {
			return m
		}
	}
}

// giveBack hands the results a drained pull fetched, and held, back to the consumer once the
// pull no longer listens (a result given back before would be delivered to it again).
func giveBack(it jetstream.MessagesContext, held jetstream.Msg) {
	var back []jetstream.Msg
	if held != nil {
		back = append(back, held)
	}
	// Bounded in time and count: a drained pull's requests still pending may go on
	// delivering, and a giveBack that waited for them to stop could wait forever.
	deadline := time.Now().Add(resultWait + time.Second)
	for len(back) < 4*resultBatch {
		wait := time.Until(deadline)
		if wait <= 0 {
			break
		}
		m, err := it.Next(jetstream.NextMaxWait(wait))
		if err != nil {
			break
		}
		back = append(back, m)
	}
	it.Stop()
	if c, ok := it.(interface{ Closed() <-chan struct{} }); ok {
		select {
		case <-c.Closed():
		case <-time.After(5 * time.Second):
		}
	}
	for _, m := range back {
		_ = m.Nak()
	}
}

// resultBatch is how many results a pull asks for; resultWait how long it stays open.
const (
	resultBatch = 64
	resultWait  = 5 * time.Second
)

// hand gives f to a Next; false when Close came first.
func (r *results) hand(f fetched) bool {
	select {
	case r.next <- f:
		return true
	case <-r.ctx.Done():
		return false
	}
}

// decodeResult reads a fetched result and its delivery count.
func (r *results) decodeResult(m jetstream.Msg) (*resultDelivery, error) {
	d := &resultDelivery{m: m, attempt: 1, a: r.a, recordedOn: m.Headers().Get(recordedHeader)}
	if err := json.Unmarshal(m.Data(), &d.res); err != nil {
		return nil, err
	}
	if meta, err := m.Metadata(); err == nil {
		d.attempt = int(meta.NumDelivered)
	}
	return d, nil
}

// close stops the shards' pulls and waits for them.
func (r *results) close() {
	r.cancel()
	r.wg.Wait()
}

type resultDelivery struct {
	res        broker.Result
	m          jetstream.Msg
	attempt    int
	a          *adapter
	recordedOn string // see recordedHeader
}

var _ broker.RecordedResult = (*resultDelivery)(nil)

// Recorded: the job's final record holds this result, written under the lease the result was
// published under and stored by a quorum, or by the engine in this process (recordedHeader).
func (d *resultDelivery) Recorded() bool {
	switch engine := d.a.cfg.EngineID; {
	case d.recordedOn == "":
		return false
	case d.a.cfg.Replicas > 1:
		return true
	default:
		return engine != "" && d.recordedOn == engine && d.a.nc.ConnectedServerId() == engine
	}
}

func (d *resultDelivery) Result() broker.Result { return d.res }
func (d *resultDelivery) Attempt() int          { return d.attempt }

func (d *resultDelivery) Ack(ctx context.Context) error {
	err := d.m.Ack()
	if err != nil && !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
		return fmt.Errorf("natsjs: ack result %s: %w", d.res.JobID, err)
	}
	return nil
}
