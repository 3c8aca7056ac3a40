package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// A job record's key is "<group>.<id>" for an id that ends in its tenant's group
// (broker.JobGroupOf), and the id itself for one of the older form. Under the prefix
// "<group>." the records' stream thus holds the records of the group's tenants and their
// fence keys ("<group>._fence.<p>.<u>", see jobsFenceSubject): one subject filter covers a
// record and its tenant's fence, which is what lets the stream fence a record write
// (UpdateFenced).

// recordKey is id's key in the records' bucket.
func recordKey(id string) string {
	if g, ok := broker.JobGroupOf(id); ok {
		return g + "." + id
	}
	return id
}

// validID reports whether id can name a record: not a fence key or settle mark, nothing that
// reaches another key ('.') or several (wildcards).
func validID(id string) bool {
	return id != "" && !strings.HasPrefix(id, "_") && !strings.ContainsAny(id, ".*> \t\r\n")
}

// groupFilter is the subjects of the records and fence keys of group g.
func groupFilter(g string) string { return "$KV." + bucketJobs + "." + g + ".>" }

var _ broker.FencedJobs = (*jobs)(nil)

// UpdateFenced is Update storing fn's record only while t's fence key in the records' stream
// carries token, refused by the stream itself. The write is published on the condition that
// the last message under its group's prefix (groupFilter) is still the one at which this
// client saw both t's fence key carrying token and the record fn judged
// (Nats-Expected-Last-Subject-Sequence, with the prefix as its subject). That one condition
// is the record's compare-and-set and the fence at once: a newer owner's acquisition raises
// the fence key, and any write of the record changes the record, so either makes the stream
// refuse the write. A write of another record of the group only makes the writer read again.
// After its own write a holder knows the group as of that write, so its next write of the
// same record (a job's final state after its running mark) reads nothing when no one wrote
// in the group since. A record of an id of the older form, or of another group than t's, is
// broker.ErrUnfenced.
func (j *jobs) UpdateFenced(ctx context.Context, id string, t tenant.ID, token uint64, fn func(*broker.JobRecord) error) (broker.JobRecord, error) {
	g, ok := broker.JobGroupOf(id)
	if !ok || g != broker.JobGroup(t) {
		return broker.JobRecord{}, broker.ErrUnfenced
	}
	snap, cached := j.lastFenced(id, t, token)
	known := cached // snap is a view still worth writing on
	for range maxFencedTries {
		if !known {
			var err error
			if snap, err = j.snapshot(ctx, g, id, t, token); err != nil {
				return broker.JobRecord{}, err
			}
			cached, known = false, true
		}
		var rec broker.JobRecord
		if err := json.Unmarshal(snap.data, &rec); err != nil {
			return broker.JobRecord{}, fmt.Errorf("natsjs: decode job record %s: %w", id, err)
		}
		if err := fn(&rec); err != nil {
			if cached { // fn judged what this client wrote; judge the current record
				known = false
				continue
			}
			return rec, err
		}
		data, err := json.Marshal(rec)
		if err != nil {
			return rec, fmt.Errorf("natsjs: encode job record %s: %w", id, err)
		}
		on := j.a.nc.ConnectedServerId()
		ack, err := j.a.js.Publish(ctx, "$KV."+bucketJobs+"."+g+"."+id, data,
			jetstream.WithExpectLastSequenceForSubject(snap.seq, groupFilter(g)))
		if isWrongLastSeq(err) {
			known = false
			continue
		}
		if err != nil {
			j.remember(id, writtenRecord{}, false)
			return rec, ctxErr(ctx, wrap("update record for", id, err))
		}
		j.remember(id, writtenRecord{data: data, rev: ack.Sequence}, true)
		if j.a.nc.ConnectedServerId() != on {
			on = "" // stored by one server or the next: which, the ack does not say
		}
		j.rememberFenced(id, fencedWrite{tenant: t, token: token, data: data, seq: ack.Sequence, final: rec.State.Final(), on: on})
		return rec, nil
	}
	return broker.JobRecord{}, fmt.Errorf("natsjs: update record for %s: the records of %s's group keep changing; try again", id, t)
}

// maxFencedTries bounds UpdateFenced's attempts and snapshot's reads: each lost race means
// another writer in the group made progress.
const maxFencedTries = 50

// fencedWrite is a holder's view of a record's group: as of stream sequence seq, the last
// under the group's prefix, t's fence key carried token and the record was data. After its
// own write a holder knows it as of the write's sequence.
type fencedWrite struct {
	tenant tenant.ID
	token  uint64
	data   []byte
	seq    uint64
	final  bool   // the record it wrote is final
	on     string // the server that stored it, when known (nats.Conn.ConnectedServerId)
}

// recordedOn is the server that stored the final record of id this client wrote last under
// t's token, or "" when it wrote none (see recordedHeader).
func (j *jobs) recordedOn(id string, t tenant.ID, token uint64) string {
	if w, ok := j.lastFenced(id, t, token); ok && w.final {
		return w.on
	}
	return ""
}

func (j *jobs) lastFenced(id string, t tenant.ID, token uint64) (fencedWrite, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	w, ok := j.fenced[id]
	return w, ok && w.tenant == t && w.token == token
}

func (j *jobs) rememberFenced(id string, w fencedWrite) {
	j.mu.Lock()
	defer j.mu.Unlock()
	putBounded(&j.fenced, id, w)
}

// snapshot reads group g as one view for a holder's write of id: the last message under the
// group's prefix first, then t's fence key and id's record, each of which must be at or before
// it (else it changed since, and the view is read again); one of them that is that last
// message is not read again. A fence key that is missing or carries an older token is raised
// to token first; a newer one is broker.ErrLeaseLost. On more than one replica the reads go to
// the stream's leader (see lastMsg): a follower's older fence key or record would pass for the
// view at that sequence.
func (j *jobs) snapshot(ctx context.Context, g, id string, t tenant.ID, token uint64) (fencedWrite, error) {
	fenceSubj, recSubj := jobsFenceSubject(t), "$KV."+bucketJobs+"."+g+"."+id
	for range maxFencedTries {
		last, err := j.a.lastMsg(ctx, j.s, groupFilter(g))
		if err != nil {
			return fencedWrite{}, ctxErr(ctx, fmt.Errorf("natsjs: read the records of %s's group: %w", t, err))
		}
		fm, rm := last, last
		if last.subject != fenceSubj {
			if fm, err = j.a.lastMsg(ctx, j.s, fenceSubj); err != nil {
				return fencedWrite{}, ctxErr(ctx, fmt.Errorf("natsjs: read the fence of %s: %w", t, err))
			}
		}
		f, err := fenceOf(t, fm)
		switch {
		case err != nil:
			return fencedWrite{}, err
		case f.seq > last.seq:
			continue
		case f.token > token:
			return fencedWrite{}, fmt.Errorf("natsjs: tenant %s was acquired with token %d, after %d: %w", t, f.token, token, broker.ErrLeaseLost)
		case f.token < token: // aged out, or a raise a crash lost
			if _, err := j.a.settles.raise(ctx, t, token, f.seq); err != nil && !errors.Is(err, broker.ErrConflict) {
				return fencedWrite{}, err
			}
			continue
		}
		if last.subject != recSubj {
			if rm, err = j.a.lastMsg(ctx, j.s, recSubj); err != nil {
				return fencedWrite{}, ctxErr(ctx, wrap("get record for", id, err))
			}
		}
		switch {
		case rm.seq == 0 || rm.deleted:
			return fencedWrite{}, broker.ErrNotFound
		case rm.seq > last.seq:
			continue
		}
		return fencedWrite{tenant: t, token: token, data: rm.data, seq: last.seq}, nil
	}
	return fencedWrite{}, fmt.Errorf("natsjs: read the records of %s's group: they keep changing; try again", t)
}
