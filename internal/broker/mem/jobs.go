package mem

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// jobStore keeps records as JSON with a revision for compare-and-set, the ids sorted (job ids
// sort by acceptance time, so Recent reads the end), and a notifier per id that Wait is
// blocked on. Records (and the notifier of an id waited for but never written) are kept until
// the engine is dropped.
type jobStore struct {
	mu      sync.Mutex
	rev     uint64
	recs    map[string]jobEntry
	ids     []string
	changed map[string]*notifier
}

type jobEntry struct {
	data []byte
	rev  uint64
}

func newJobStore() *jobStore {
	return &jobStore{recs: map[string]jobEntry{}, changed: map[string]*notifier{}}
}

// put stores data for id and wakes its waiters. Called with s.mu held.
func (s *jobStore) put(id string, data []byte) {
	if _, ok := s.recs[id]; !ok {
		i, _ := slices.BinarySearch(s.ids, id)
		s.ids = slices.Insert(s.ids, i, id)
	}
	s.rev++
	s.recs[id] = jobEntry{data: data, rev: s.rev}
	if n := s.changed[id]; n != nil {
		n.fire()
		delete(s.changed, id)
	}
}

type jobs struct{ c *conn }

var (
	_ broker.Jobs        = (*jobs)(nil)
	_ broker.FencedJobs  = (*jobs)(nil)
	_ broker.RecordStore = (*jobs)(nil)
)

func (j *jobs) Create(ctx context.Context, rec broker.JobRecord) error {
	if err := j.c.check(ctx); err != nil {
		return err
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("mem: encode job record %s: %w", rec.Job.ID, err)
	}
	s := j.c.e.jobs
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.recs[rec.Job.ID]; ok {
		return broker.ErrExists
	}
	s.put(rec.Job.ID, data)
	return nil
}

func (j *jobs) Get(ctx context.Context, id string) (broker.JobRecord, error) {
	if err := j.c.check(ctx); err != nil {
		return broker.JobRecord{}, err
	}
	rec, _, err := j.get(id)
	return rec, err
}

func (j *jobs) get(id string) (broker.JobRecord, uint64, error) {
	s := j.c.e.jobs
	s.mu.Lock()
	e, ok := s.recs[id]
	s.mu.Unlock()
	if !ok {
		return broker.JobRecord{}, 0, broker.ErrNotFound
	}
	rec, err := decodeRecord(id, e.data)
	return rec, e.rev, err
}

func decodeRecord(id string, data []byte) (broker.JobRecord, error) {
	var rec broker.JobRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return broker.JobRecord{}, fmt.Errorf("mem: decode job record %s: %w", id, err)
	}
	return rec, nil
}

// Update runs fn outside the lock on a decoded copy and stores the result if nobody wrote
// the record meanwhile; otherwise it starts again (broker.UpdateRecord).
func (j *jobs) Update(ctx context.Context, id string, fn func(*broker.JobRecord) error) (broker.JobRecord, error) {
	return broker.UpdateRecord(ctx, j, id, fn, nil)
}

// UpdateFenced is Update whose store also holds the lease store's lock and checks t's live
// lease carries token (the lease store's lock is taken first, as nowhere takes them the other
// way round).
func (j *jobs) UpdateFenced(ctx context.Context, id string, t tenant.ID, token uint64, fn func(*broker.JobRecord) error) (broker.JobRecord, error) {
	return broker.UpdateRecord(ctx, j, id, fn, &broker.Holder{Tenant: t, Token: token})
}

// fence is a lease a write is conditioned on.
type fence struct {
	t     tenant.ID
	token uint64
}

// ReadRecord returns id's record and its revision.
func (j *jobs) ReadRecord(ctx context.Context, id string) (broker.JobRecord, uint64, error) {
	if err := j.c.check(ctx); err != nil {
		return broker.JobRecord{}, 0, err
	}
	return j.get(id)
}

// WriteRecord stores rec if the record is still at rev and, with h, while h's lease is live.
func (j *jobs) WriteRecord(ctx context.Context, id string, rec broker.JobRecord, rev uint64, h *broker.Holder) error {
	if err := j.c.check(ctx); err != nil {
		return err
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("mem: encode job record %s: %w", id, err)
	}
	if h != nil {
		unlock, err := j.c.e.leases.hold(&fence{t: h.Tenant, token: h.Token}, "job "+id)
		if err != nil {
			return err
		}
		defer unlock()
	}
	s := j.c.e.jobs
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recs[id].rev != rev {
		return broker.ErrConflict
	}
	s.put(id, data)
	return nil
}

func (j *jobs) Recent(ctx context.Context, n int) ([]broker.JobRecord, error) {
	if err := j.c.check(ctx); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, nil
	}
	s := j.c.e.jobs
	s.mu.Lock()
	ids := s.ids[max(len(s.ids)-n, 0):]
	entries := make([]jobEntry, len(ids))
	for i, id := range ids {
		entries[len(ids)-1-i] = s.recs[id] // newest first
	}
	s.mu.Unlock()
	out := make([]broker.JobRecord, 0, len(entries))
	for _, e := range entries {
		var rec broker.JobRecord
		if err := json.Unmarshal(e.data, &rec); err != nil {
			return nil, fmt.Errorf("mem: decode job record: %w", err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// Wait checks the record, then sleeps until it is written again (or created), ctx ends or the
// client closes. When ctx ends it returns the last record it saw with ctx.Err().
func (j *jobs) Wait(ctx context.Context, id string, until func(broker.JobRecord) bool) (broker.JobRecord, error) {
	var last broker.JobRecord
	for {
		if err := j.c.check(ctx); err != nil {
			return last, err
		}
		e, ok, changed := j.watch(id)
		if ok {
			rec, err := decodeRecord(id, e.data)
			if err != nil {
				return last, err
			}
			if last = rec; until(rec) {
				return rec, nil
			}
		}
		if err := j.c.wait(ctx, changed, time.Time{}); err != nil {
			return last, err
		}
	}
}

// watch returns id's entry, if any, and a channel closed on its next write.
func (j *jobs) watch(id string) (jobEntry, bool, <-chan struct{}) {
	s := j.c.e.jobs
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.changed[id]
	if n == nil {
		n = &notifier{}
		s.changed[id] = n
	}
	e, ok := s.recs[id]
	return e, ok, n.wait()
}
