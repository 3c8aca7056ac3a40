package natsjs

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// claimIndex is one instance's view of the claims bucket, kept current by a watch. It only
// chooses what to try: every hand-out is a compare-and-set on the engine.
type claimIndex struct {
	ready chan struct{} // closed once the watch delivered the current records

	mu      sync.Mutex
	entries map[string]claimEntry
	changed chan struct{} // closed and replaced on every change
}

type claimEntry struct {
	v   claimValue
	rev uint64
}

// watchClaims starts the watch; it ends when the connection closes.
func watchClaims(kv jetstream.KeyValue) (*claimIndex, error) {
	// The watch outlives any one call: it is this instance's dispatcher.
	w, err := kv.WatchAll(context.Background())
	if err != nil {
		return nil, err
	}
	idx := &claimIndex{ready: make(chan struct{}), entries: map[string]claimEntry{}, changed: make(chan struct{})}
	go idx.follow(w)
	return idx, nil
}

func (idx *claimIndex) follow(w jetstream.KeyWatcher) {
	readyOnce := sync.OnceFunc(func() { close(idx.ready) })
	defer readyOnce() // a closed connection ends the watch; callers then fail on the engine
	for e := range w.Updates() {
		if e == nil {
			readyOnce()
			continue
		}
		idx.apply(e)
	}
}

func (idx *claimIndex) apply(e jetstream.KeyValueEntry) {
	var v claimValue
	if e.Operation() != jetstream.KeyValuePut || json.Unmarshal(e.Value(), &v) != nil {
		v = claimValue{Done: true}
	}
	idx.set(e.Key(), claimEntry{v: v, rev: e.Revision()})
}

// set records e for key unless the index already holds a later revision.
func (idx *claimIndex) set(key string, e claimEntry) {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	if cur, ok := idx.entries[key]; ok && cur.rev >= e.rev {
		return
	}
	idx.entries[key] = e // a done record stays, so its revision keeps stale updates out
	idx.notify()
}

// forget marks key's revision rev as not available here (another taker or a request wrote
// a later one, which the watch will bring).
func (idx *claimIndex) forget(key string, rev uint64) {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	if cur, ok := idx.entries[key]; ok && cur.rev == rev {
		cur.v.Done = true
		idx.entries[key] = cur
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

// oldest returns the waiting request with the oldest since (ties: made first, then key), or
// "" and the time the earliest hand-out runs out (zero if none).
func (idx *claimIndex) oldest(now time.Time) (key string, best claimEntry, wake time.Time) {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	for k, e := range idx.entries {
		switch {
		case e.v.Done:
		case e.v.waiting(now):
			if key == "" || before(e.v, k, best.v, key) {
				key, best = k, e
			}
		case wake.IsZero() || e.v.Until.Before(wake):
			wake = e.v.Until
		}
	}
	return key, best, wake
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

func (idx *claimIndex) waiting(now time.Time) int {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	n := 0
	for _, e := range idx.entries {
		if e.v.waiting(now) {
			n++
		}
	}
	return n
}
