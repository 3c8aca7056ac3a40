package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// claimIndex is one instance's view of the claims bucket, kept current by a watch. It only
// chooses what to try: every hand-out is a compare-and-set on the engine.
type claimIndex struct {
	ready chan struct{} // closed once the watch delivered the current records

	mu      sync.Mutex
	entries map[string]claimEntry
	// live holds the keys whose record is not done: the scans (oldest, waiting) walk these
	// only, not every tenant that ever asked (most records are done).
	live    map[string]struct{}
	seen    uint64        // the highest revision received or written
	changed chan struct{} // closed and replaced on every change
	// taking holds the keys one of this instance's workers is trying to take: the others
	// pick the next oldest instead of racing it for the same compare-and-set.
	taking map[string]bool
}

type claimEntry struct {
	v   claimValue
	rev uint64
}

// watchHeartbeat is how often the engine tells an idle watch it is alive: a watch that
// hears nothing for two of them starts over from where it was (on a cluster, after the node
// serving it died), so the index lags a lost node by seconds, not by the KV watcher's
// fixed 5s heartbeat and its resets.
const watchHeartbeat = time.Second

// watchCheck is how often the watchdog compares the index with the bucket: one stream info
// request per process per period, idle or not.
const watchCheck = 2 * time.Second

// claimWatch is the running watch: the current consumer and the watchdog that replaces it.
type claimWatch struct {
	s    jetstream.Stream
	idx  *claimIndex
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
// watchdog compares, every watchCheck, the bucket's last sequence with what the index has
// seen: an index still short of the sequence the previous check read (a live watch is
// milliseconds behind), or ahead of the bucket (the engine lost the memory bucket and
// started over), gets a fresh watch.
func watchClaims(js jetstream.JetStream, log *slog.Logger) (*claimIndex, *claimWatch, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "KV_"+bucketClaims)
	if err != nil {
		return nil, nil, err
	}
	idx := &claimIndex{ready: make(chan struct{}), entries: map[string]claimEntry{}, live: map[string]struct{}{},
		changed: make(chan struct{}), taking: map[string]bool{}}
	readyOnce := sync.OnceFunc(func() { close(idx.ready) })
	if s.CachedInfo().State.Msgs == 0 {
		readyOnce()
	}
	w := &claimWatch{s: s, idx: idx, log: log, done: make(chan struct{})}
	cc, err := w.consume(ctx, readyOnce)
	if err != nil {
		return nil, nil, err
	}
	w.cc = cc
	go func() { <-cc.Closed(); readyOnce() }() // callers then fail on the engine
	go w.watchdog(s.CachedInfo().State.LastSeq)
	return idx, w, nil
}

// consume starts an ordered consumer feeding the index, last record per key first.
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
	return c.Consume(func(m jetstream.Msg) { w.idx.receive(m, ready) },
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
		seen := w.idx.lastSeen() // before the info: whatever it saw, the bucket had by then
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

// restart replaces the consumer; clear drops what the index held (revisions of a bucket
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
		w.idx.clear()
	}
	ctx, cancel := context.WithTimeout(context.Background(), watchCheck)
	defer cancel()
	cc, err := w.consume(ctx, func() {})
	if err != nil {
		w.log.Warn("claims watch: start over failed; will try again", slog.Any("err", err))
		return // the next check finds the index still behind and tries again
	}
	w.cc = cc
}

// claimsPrefix is the subject prefix of the claims bucket's keys.
const claimsPrefix = "$KV." + bucketClaims + "."

// receive applies one record; the index is ready once nothing is left to catch up on.
func (idx *claimIndex) receive(m jetstream.Msg, ready func()) {
	meta, err := m.Metadata()
	if err != nil {
		return
	}
	var v claimValue
	op := m.Headers().Get("KV-Operation")
	if op != "" || json.Unmarshal(m.Data(), &v) != nil {
		v = claimValue{Done: true} // DEL, PURGE or unreadable
	}
	idx.set(strings.TrimPrefix(m.Subject(), claimsPrefix), claimEntry{v: v, rev: meta.Sequence.Stream})
	if meta.NumPending == 0 {
		ready()
	}
}

// set records e for key unless the index already holds a later revision.
func (idx *claimIndex) set(key string, e claimEntry) {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	idx.seen = max(idx.seen, e.rev)
	if cur, ok := idx.entries[key]; ok && cur.rev >= e.rev {
		return
	}
	idx.put(key, e) // a done record stays, so its revision keeps stale updates out
	idx.notify()
}

// lookup returns key's entry as this index last saw it.
func (idx *claimIndex) lookup(key string) (claimEntry, bool) {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	e, ok := idx.entries[key]
	return e, ok
}

// forget marks key's revision rev as not available here (another taker or a request wrote
// a later one, which the watch will bring).
func (idx *claimIndex) forget(key string, rev uint64) {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	if cur, ok := idx.entries[key]; ok && cur.rev == rev {
		cur.v.Done = true
		idx.put(key, cur)
	}
}

func (idx *claimIndex) lastSeen() uint64 {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	return idx.seen
}

// clear forgets every entry.
func (idx *claimIndex) clear() {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	idx.entries, idx.live, idx.seen = map[string]claimEntry{}, map[string]struct{}{}, 0
	idx.notify()
}

// put stores key's entry and keeps live in step. Lock held.
func (idx *claimIndex) put(key string, e claimEntry) {
	idx.entries[key] = e
	if e.v.Done {
		delete(idx.live, key)
	} else {
		idx.live[key] = struct{}{}
	}
}

func (idx *claimIndex) notify() {
	close(idx.changed)
	idx.changed = make(chan struct{})
}

// changes is closed at the next change.
func (idx *claimIndex) changes() <-chan struct{} {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	return idx.changed
}

// oldest returns the waiting request with the oldest since (ties: made first, then key)
// that no warm preference keeps from taker and no other worker here is taking, or "" and
// the time the earliest hand-out or preference runs out (zero if none). The key returned is
// reserved for the caller until it calls taken.
func (idx *claimIndex) oldest(taker string, now time.Time) (key string, best claimEntry, wake time.Time) {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	for k := range idx.live {
		e := idx.entries[k]
		switch {
		case idx.taking[k]:
		case e.v.waiting(now) && e.v.excludes(taker, now):
			wake = earliest(wake, e.v.WarmUntil)
		case e.v.waiting(now):
			if key == "" || before(e.v, k, best.v, key) {
				key, best = k, e
			}
		case wake.IsZero() || e.v.Until.Before(wake):
			wake = e.v.Until
		}
	}
	if key != "" {
		idx.taking[key] = true
	}
	return key, best, wake
}

// taken ends the reservation oldest made for key, and wakes the workers that passed it by.
func (idx *claimIndex) taken(key string) {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	delete(idx.taking, key)
	idx.notify()
}

func before(a claimValue, ak string, b claimValue, bk string) bool {
	if !a.Since.Equal(b.Since) {
		return a.Since.Before(b.Since)
	}
	if !a.At.Equal(b.At) {
		return a.At.Before(b.At)
	}
	return ak < bk
}

// earliest is the earlier of a and b, where zero is "none".
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// waiting counts the waiting requests taker could take.
func (idx *claimIndex) waiting(taker string, now time.Time) int {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	n := 0
	for k := range idx.live {
		if e := idx.entries[k]; e.v.waiting(now) && !e.v.excludes(taker, now) {
			n++
		}
	}
	return n
}
