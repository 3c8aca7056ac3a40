package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
)

type jobs struct {
	kv jetstream.KeyValue
	s  jetstream.Stream
	a  *adapter // for fenced writes: the connection and the tenants' fence keys (a.settles)

	// written holds this client's last write of each record it updated (bounded), so the
	// next Update of it (a worker's final state after its running mark) can skip the read:
	// the compare-and-set still refuses it if anyone wrote since.
	mu      sync.Mutex
	written map[string]writtenRecord
	// created holds the revision of records this client created and has not yet published
	// the job of: the publish tells the worker (createdHeader), which then marks the job
	// running without reading the record first.
	created map[string]uint64
	// fenced holds this client's last fenced write of each record (bounded): UpdateFenced.
	fenced map[string]fencedWrite
}

// createdHeader on a job's message is the revision at which its record was created (as
// broker.QueuedRecord): a worker's first compare-and-set can start from it, and fails (then
// reads) if anyone wrote the record since.
const createdHeader = "Wo-Record-Created"

// takeCreated returns (and forgets) the revision at which this client created id's record.
func (j *jobs) takeCreated(id string) (uint64, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	rev, ok := j.created[id]
	delete(j.created, id)
	return rev, ok
}

// seed remembers a record created elsewhere at rev, unless this client wrote it since.
func (j *jobs) seed(job broker.Job, rev uint64) {
	data, err := json.Marshal(broker.QueuedRecord(job))
	if err != nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if w, ok := j.written[job.ID]; ok && w.rev >= rev {
		return
	}
	putBounded(&j.written, job.ID, writtenRecord{data: data, rev: rev})
}

// putBounded sets m[k] = v; a map at maxWritten starts over first.
func putBounded[V any](m *map[string]V, k string, v V) {
	if *m == nil || len(*m) >= maxWritten {
		*m = map[string]V{}
	}
	(*m)[k] = v
}

type writtenRecord struct {
	data []byte
	rev  uint64
}

// maxWritten bounds jobs.written and jobs.created; past it a map starts over.
const maxWritten = 4096

func (j *jobs) lastWrite(id string) (writtenRecord, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	w, ok := j.written[id]
	return w, ok
}

func (j *jobs) remember(id string, w writtenRecord, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !ok {
		delete(j.written, id)
		return
	}
	putBounded(&j.written, id, w)
}

var (
	_ broker.Jobs          = (*jobs)(nil)
	_ broker.RecordStore   = (*jobs)(nil)
	_ broker.CachedRecords = (*jobs)(nil)
)

func (j *jobs) Create(ctx context.Context, rec broker.JobRecord) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("natsjs: encode job record %s: %w", rec.Job.ID, err)
	}
	if !validID(rec.Job.ID) {
		return fmt.Errorf("natsjs: create record: %q is no job id", rec.Job.ID)
	}
	rev, err := j.kv.Create(ctx, recordKey(rec.Job.ID), data)
	if errors.Is(err, jetstream.ErrKeyExists) || isWrongLastSeq(err) {
		return broker.ErrExists
	}
	if err == nil && reflect.DeepEqual(rec, broker.QueuedRecord(rec.Job)) {
		j.mu.Lock()
		putBounded(&j.created, rec.Job.ID, rev)
		j.mu.Unlock()
	}
	return ctxErr(ctx, wrap("create record for", rec.Job.ID, err))
}

func (j *jobs) Get(ctx context.Context, id string) (broker.JobRecord, error) {
	rec, _, err := j.get(ctx, id)
	return rec, err
}

func (j *jobs) get(ctx context.Context, id string) (broker.JobRecord, uint64, error) {
	if !validID(id) {
		return broker.JobRecord{}, 0, broker.ErrNotFound
	}
	e, err := j.kv.Get(ctx, recordKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) || errors.Is(err, jetstream.ErrInvalidKey) {
		return broker.JobRecord{}, 0, broker.ErrNotFound
	}
	if err != nil {
		return broker.JobRecord{}, 0, ctxErr(ctx, wrap("get record for", id, err))
	}
	var rec broker.JobRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return broker.JobRecord{}, 0, fmt.Errorf("natsjs: decode job record %s: %w", id, err)
	}
	return rec, e.Revision(), nil
}

// Update is broker.UpdateRecord: it starts from this client's last write of the record, if it
// remembers one.
func (j *jobs) Update(ctx context.Context, id string, fn func(*broker.JobRecord) error) (broker.JobRecord, error) {
	return broker.UpdateRecord(ctx, j, id, fn, nil)
}

// ReadRecord returns id's record and its revision.
func (j *jobs) ReadRecord(ctx context.Context, id string) (broker.JobRecord, uint64, error) {
	return j.get(ctx, id)
}

// LastWritten decodes this client's last write of id, if it remembers one.
func (j *jobs) LastWritten(id string) (broker.JobRecord, uint64, bool) {
	w, ok := j.lastWrite(id)
	var rec broker.JobRecord
	if !ok || json.Unmarshal(w.data, &rec) != nil {
		return broker.JobRecord{}, 0, false
	}
	return rec, w.rev, true
}

// WriteRecord updates the key at revision rev and remembers the write (forgets it on failure).
// h is never given: fenced writes take UpdateFenced's own path.
func (j *jobs) WriteRecord(ctx context.Context, id string, rec broker.JobRecord, rev uint64, _ *broker.Holder) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("natsjs: encode job record %s: %w", id, err)
	}
	rev, err = j.kv.Update(ctx, recordKey(id), data, rev)
	j.remember(id, writtenRecord{data: data, rev: rev}, err == nil)
	if isWrongLastSeq(err) {
		return broker.ErrConflict
	}
	return ctxErr(ctx, wrap("update record for", id, err))
}

// Recent reads the tail of the bucket's stream rather than listing every key: the newest
// records are among the latest writes. It widens the window until it holds n records (or the
// whole stream), so its cost follows n, not the number of jobs kept.
func (j *jobs) Recent(ctx context.Context, n int) ([]broker.JobRecord, error) {
	info, err := j.s.Info(ctx)
	if err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("natsjs: recent jobs: %w", err))
	}
	first, last := info.State.FirstSeq, info.State.LastSeq
	if n <= 0 || info.State.Msgs == 0 {
		return nil, nil
	}
	for window := uint64(4 * n); ; window *= 2 {
		start := first
		if last >= window && last-window+1 > first {
			start = last - window + 1
		}
		recs, err := j.readFrom(ctx, start, last)
		if err != nil {
			return nil, err
		}
		if len(recs) >= n || start == first {
			slices.SortFunc(recs, func(a, b broker.JobRecord) int { return strings.Compare(b.Job.ID, a.Job.ID) })
			return recs[:min(n, len(recs))], nil
		}
	}
}

// readFrom returns the current records written between stream sequences start and last. It
// reads them one by one (direct gets, next by subject: superseded revisions are skipped) and
// so leaves nothing behind on the engine, however often status is polled; readers parts of
// the range at once, each in order.
func (j *jobs) readFrom(ctx context.Context, start, last uint64) ([]broker.JobRecord, error) {
	parts := splitRange(start, last, readers)
	found := make([][]broker.JobRecord, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() {
			errs[i] = scan(ctx, j.s, "$KV."+bucketJobs+".>", p[0], p[1], func(m *jetstream.RawStreamMsg) {
				var rec broker.JobRecord
				if m.Header.Get("KV-Operation") == "" && json.Unmarshal(m.Data, &rec) == nil {
					found[i] = append(found[i], rec)
				}
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("natsjs: recent jobs: %w", err))
	}
	return slices.Concat(found...), nil
}

// readers is how many parts of its range readFrom reads at once.
const readers = 8

// splitRange splits [start, last] into at most n contiguous parts of nearly equal size.
func splitRange(start, last, n uint64) [][2]uint64 {
	if start > last || n == 0 {
		return nil
	}
	size := (last - start + n) / n // ceil((last-start+1)/n)
	var out [][2]uint64
	for a := start; a <= last; a += size {
		out = append(out, [2]uint64{a, min(a+size-1, last)})
		if a+size < a { // overflow
			break
		}
	}
	return out
}

func (j *jobs) Wait(ctx context.Context, id string, until func(broker.JobRecord) bool) (broker.JobRecord, error) {
	if !validID(id) {
		<-ctx.Done()
		return broker.JobRecord{}, ctx.Err()
	}
	w, err := j.kv.Watch(ctx, recordKey(id))
	if err != nil {
		return broker.JobRecord{}, ctxErr(ctx, wrap("watch record for", id, err))
	}
	defer func() { _ = w.Stop() }()
	var last broker.JobRecord
	for {
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case e := <-w.Updates():
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			if err := json.Unmarshal(e.Value(), &last); err == nil && until(last) {
				return last, nil
			}
		}
	}
}
