package natsjs

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// Watch feeds f the bucket's records and then every write (see watchClaims).
func (s *claimStore) Watch(f broker.ClaimFeed) (func(), error) {
	w, err := s.watchClaims(f)
	if err != nil {
		return nil, err
	}
	s.watch.Store(w)
	return w.stop, nil
}

// watchHeartbeat is how often the engine tells an idle watch it is alive: a watch that
// hears nothing for two of them starts over from where it was (on a cluster, after the node
// serving it died), so a process's index lags a lost node by seconds, not by the KV watcher's
// fixed 5s heartbeat and its resets.
const watchHeartbeat = time.Second

// watchCheck is how often the watchdog compares what the watch fed with the bucket: one stream info
// request per process per period, idle or not.
const watchCheck = 2 * time.Second

// claimWatch is the running watch: the current consumer and the watchdog that replaces it.
type claimWatch struct {
	s    jetstream.Stream
	cs   *claimStore
	feed broker.ClaimFeed
	log  *slog.Logger
	mu   sync.Mutex
	cc   jetstream.ConsumeContext
	done chan struct{}
	once sync.Once
}

// watchClaims starts the watch: an ordered consumer on the bucket's stream, last record per
// key first. It ends when stop is called or the connection closes.
//
// The ordered consumer is meant to notice a lost server and start over by itself, but on a
// cluster that lost a node under load a process's watch was seen to stop without a word
// while everyone's claims went unanswered (TestClusterLosesANode, about 1 run in 10). So a
// watchdog compares, every watchCheck, the bucket's last sequence with the last one fed or
// written here: a watch still short of the sequence the previous check read (a live watch is
// milliseconds behind), or ahead of the bucket (the engine lost the memory bucket and started
// over: the feed is reset), is started afresh.
func (cs *claimStore) watchClaims(f broker.ClaimFeed) (*claimWatch, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := cs.js.Stream(ctx, "KV_"+bucketClaims)
	if err != nil {
		return nil, err
	}
	if s.CachedInfo().State.Msgs == 0 {
		f.Ready()
	}
	w := &claimWatch{s: s, cs: cs, feed: f, log: cs.log, done: make(chan struct{})}
	cc, err := w.consume(ctx, f.Ready)
	if err != nil {
		return nil, err
	}
	w.cc = cc
	go func() { <-cc.Closed(); f.Ready() }() // callers then fail on the engine
	go w.watchdog(s.CachedInfo().State.LastSeq)
	return w, nil
}

// consume starts an ordered consumer feeding the feed, last record per key first.
func (w *claimWatch) consume(ctx context.Context, ready func()) (jetstream.ConsumeContext, error) {
	c, err := w.s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{claimsPrefix + ">"}, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
		// A process that dies leaves its consumer behind: the engine removes it after this
		// long without a pull (a live one pulls every PullExpiry), not the default 5 minutes,
		// so workers that come and go (autoscaling) do not pile them up.
		InactiveThreshold: 10 * watchHeartbeat})
	if err != nil {
		return nil, err
	}
	return c.Consume(func(m jetstream.Msg) { w.receive(m, ready) },
		jetstream.PullExpiry(5*watchHeartbeat), jetstream.PullHeartbeat(watchHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, jetstream.ErrConnectionClosed) { // closed: the process is leaving
				w.log.Info("claims watch", slog.Any("err", err)) // only on trouble: a lost server, a reset
			}
		}))
}

func (w *claimWatch) stop() {
	w.once.Do(func() {
		close(w.done)
		w.mu.Lock()
		defer w.mu.Unlock()
		w.cc.Stop()
	})
}

// watchdog replaces a watch that fell behind the bucket (see watchClaims).
func (w *claimWatch) watchdog(prev uint64) {
	t := time.NewTicker(watchCheck)
	defer t.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-t.C:
		}
		seen := w.cs.seen.Load() // before the info: whatever it saw, the bucket had by then
		ctx, cancel := context.WithTimeout(context.Background(), watchCheck)
		info, err := w.s.Info(ctx)
		cancel()
		if err != nil {
			continue // the engine does not answer: nothing to compare with
		}
		last := info.State.LastSeq
		switch {
		case seen > last:
			w.log.Warn("claims bucket started over (engine restarted): watching it afresh", slog.Uint64("seen", seen), slog.Uint64("last", last))
			w.restart(true)
		case seen < prev:
			w.log.Warn("claims watch fell behind the engine: starting it over", slog.Uint64("seen", seen), slog.Uint64("last", last), slog.Uint64("lastBefore", prev))
			w.restart(false)
		}
		prev = last
	}
}

// restart replaces the consumer; clear resets the feed (it holds revisions of a bucket
// that no longer exists).
func (w *claimWatch) restart(clear bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.done:
		return
	default:
	}
	w.cc.Stop()
	if clear {
		w.cs.seen.Store(0)
		w.feed.Reset()
	}
	ctx, cancel := context.WithTimeout(context.Background(), watchCheck)
	defer cancel()
	cc, err := w.consume(ctx, func() {})
	if err != nil {
		w.log.Warn("claims watch: start over failed; will try again", slog.Any("err", err))
		return // the next check finds the watch still behind and tries again
	}
	w.cc = cc
}

// claimsPrefix is the subject prefix of the claims bucket's keys.
const claimsPrefix = "$KV." + bucketClaims + "."

// receive feeds one record (an empty value, a DEL or a PURGE as a removal); the feed is ready
// once nothing is left to catch up on.
func (w *claimWatch) receive(m jetstream.Msg, ready func()) {
	meta, err := m.Metadata()
	if err != nil {
		return
	}
	w.cs.sawRevision(meta.Sequence.Stream)
	if t, err := tenant.ParseSubject(strings.TrimPrefix(m.Subject(), claimsPrefix)); err == nil {
		e := broker.ClaimEntry{Tenant: t, Version: meta.Sequence.Stream}
		if m.Headers().Get(kvOperation) == "" { // a DEL or PURGE marker is a removal
			e.Value = removedIfEmpty(m.Data())
		}
		if w.cs.skip == nil || !w.cs.skip(e) {
			w.feed.Apply(e)
		}
	}
	if meta.NumPending == 0 {
		ready()
	}
}
