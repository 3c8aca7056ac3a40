package broker

import (
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/tenant"
)

// claimIndex is one process's view of a ClaimStore, fed by its watch (it is the ClaimFeed).
// It only chooses what to try: every hand-out is a conditional write on the store.
type claimIndex struct {
	ready     chan struct{} // closed once the watch fed the current records
	readyOnce sync.Once

	mu      sync.Mutex
	entries map[tenant.ID]indexEntry
	// live holds the entries whose record is not done, as in entries: the scans (oldest,
	// waiting) walk these only, not every tenant that ever asked (most records are done), and
	// read each entry from it without a second look-up (a tenant's hash is two strings').
	live    map[tenant.ID]indexEntry
	changed chan struct{} // closed and replaced on every change
	// taking holds the tenants one of this process's workers is trying to take: the others
	// pick the next oldest instead of racing it for the same conditional write.
	taking map[tenant.ID]bool
}

var _ ClaimFeed = (*claimIndex)(nil)

type indexEntry struct {
	v   claimRecord
	ver uint64
}

func newClaimIndex() *claimIndex {
	return &claimIndex{ready: make(chan struct{}), entries: map[tenant.ID]indexEntry{},
		live: map[tenant.ID]indexEntry{}, changed: make(chan struct{}), taking: map[tenant.ID]bool{}}
}

// Apply records e unless the index holds a later version of its key.
func (idx *claimIndex) Apply(e ClaimEntry) {
	idx.set(e.Tenant, indexEntry{v: decodeClaim(e.Value), ver: e.Version})
}

// Ready marks the index as holding the store's records.
func (idx *claimIndex) Ready() { idx.readyOnce.Do(func() { close(idx.ready) }) }

// Reset forgets every entry.
func (idx *claimIndex) Reset() {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	idx.entries, idx.live = map[tenant.ID]indexEntry{}, map[tenant.ID]indexEntry{}
	idx.notify()
}

// set records e for t unless the index already holds a later version.
func (idx *claimIndex) set(t tenant.ID, e indexEntry) {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	if cur, ok := idx.entries[t]; ok && cur.ver >= e.ver {
		return
	}
	idx.put(t, e) // a done record stays, so its version keeps stale ones out
	idx.notify()
}

// lookup returns t's entry as this index last saw it.
func (idx *claimIndex) lookup(t tenant.ID) (indexEntry, bool) {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	e, ok := idx.entries[t]
	return e, ok
}

// forget marks t's version ver as not available here (another taker or a request wrote a
// later one, which the watch will bring).
func (idx *claimIndex) forget(t tenant.ID, ver uint64) {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	if cur, ok := idx.entries[t]; ok && cur.ver == ver {
		cur.v.Done = true
		idx.put(t, cur)
	}
}

// put stores t's entry and keeps live in step. Lock held.
func (idx *claimIndex) put(t tenant.ID, e indexEntry) {
	idx.entries[t] = e
	if e.v.Done {
		delete(idx.live, t)
	} else {
		idx.live[t] = e
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

// oldest returns the waiting request with the oldest since (ties: made first, then tenant)
// that no warm preference keeps from taker and no other worker here is taking, or ok false
// and the time the earliest hand-out or preference runs out (zero if none). The tenant
// returned is reserved for the caller until it calls taken.
func (idx *claimIndex) oldest(taker string, now time.Time) (t tenant.ID, best indexEntry, ok bool, wake time.Time) {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	for k, e := range idx.live {
		switch {
		case idx.taking[k]:
		case e.v.waiting(now) && e.v.excludes(taker, now):
			wake = earliest(wake, e.v.WarmUntil)
		case e.v.waiting(now):
			if !ok || claimBefore(e.v, k, best.v, t) {
				t, best, ok = k, e, true
			}
		default:
			wake = earliest(wake, e.v.Until)
		}
	}
	if ok {
		idx.taking[t] = true
	}
	return t, best, ok, wake
}

// taken ends the reservation oldest made for t, and wakes the workers that passed it by.
func (idx *claimIndex) taken(t tenant.ID) {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	delete(idx.taking, t)
	idx.notify()
}

// waiting counts the waiting requests taker could take.
func (idx *claimIndex) waiting(taker string, now time.Time) int {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	n := 0
	for _, e := range idx.live {
		if e.v.waiting(now) && !e.v.excludes(taker, now) {
			n++
		}
	}
	return n
}
