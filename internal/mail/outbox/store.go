package outbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/durable"
)

// store is where an outbox keeps its messages and its memory of deliveries: the spool
// directory (diskStore, one process) or the engine every serve shares (engineStore). The
// Outbox holds the queue's metas in memory, schedules and retries; a store only keeps.
type store interface {
	// load returns the queued messages and how many are parked.
	load(ctx context.Context) (map[string]meta, int, error)
	// add stores msg under key unless the message is queued already or was delivered within
	// sentMemory (then added is false).
	add(ctx context.Context, key string, m meta, msg []byte) (added bool, err error)
	// take readies key for one attempt: with takeSend, the caller may send (and must end the
	// attempt with delivered, retry, park or release); otherwise see takeResult.
	take(ctx context.Context, key string) (meta, []byte, takeResult, error)
	// delivered records the delivery at, then forgets the message.
	delivered(ctx context.Context, key string, m meta, at time.Time) error
	// retry stores m (its attempt counted, its next attempt set) and ends the attempt.
	retry(ctx context.Context, key string, m meta, msg []byte) error
	// park moves the message aside with its error; newly is false when it was parked before.
	park(ctx context.Context, key string, m meta, msg []byte) (newly bool, err error)
	// release ends an attempt that was not made (the outbox is stopping).
	release(ctx context.Context, key string, m meta)
	// prune forgets deliveries older than sentMemory.
	prune(ctx context.Context, now time.Time) error
	// parked lists the parked messages.
	parked(ctx context.Context) ([]parkedRecord, error)
	// unpark queues the parked message key again, due at now with its attempts counted
	// afresh, and returns its meta: ErrNotParked when there is none, errUnreadable when it
	// cannot be read.
	unpark(ctx context.Context, key string, now time.Time) (meta, error)
	// drop removes the parked message key for good: ErrNotParked when there is none.
	drop(ctx context.Context, key string) error
	// rescan is how often load must run again to see messages other processes queued;
	// 0 when nobody else writes the store.
	rescan() time.Duration
}

// takeResult says what take found.
type takeResult int

const (
	// takeSend: the message is this outbox's to send now.
	takeSend takeResult = iota
	// takeGone: the message is no longer queued (sent or parked, here or by another serve).
	takeGone
	// takeLater: not now; the returned meta's NextAt says when to look again.
	takeLater
	// takeBad: the record was unreadable and is parked; count it as failed.
	takeBad
)

// diskStore is the spool directory of one process.
type diskStore struct {
	spool
	log *slog.Logger
}

var _ store = diskStore{}

// load reads the queue, moving unreadable records aside and dropping messages delivered just
// before a crash.
func (d diskStore) load(context.Context) (map[string]meta, int, error) {
	queued, bad, err := d.spool.load()
	if err != nil {
		return nil, 0, err
	}
	for _, key := range bad {
		d.log.Warn("outbox: unreadable queued message moved to failed/", slog.String("key", key))
	}
	for key, m := range queued {
		if t, ok := d.sentAt(key); ok && !t.Before(m.Enqueued) {
			if err := durable.Remove(d.path(queueDir), key+msgExt); err != nil {
				return nil, 0, err
			}
			delete(queued, key)
		}
	}
	failed, err := d.countFailed()
	return queued, failed, err
}

func (d diskStore) add(_ context.Context, key string, m meta, msg []byte) (bool, error) {
	if t, ok := d.sentAt(key); ok && m.Enqueued.Sub(t) <= sentMemory {
		return false, nil
	}
	return true, d.write(queueDir, key, m, msg)
}

func (d diskStore) take(_ context.Context, key string) (meta, []byte, takeResult, error) {
	m, msg, err := readRecord(filepath.Join(d.path(queueDir), key+msgExt))
	if err == nil {
		return m, msg, takeSend, nil
	}
	if qerr := d.quarantine(key); qerr != nil {
		err = errors.Join(err, qerr)
	}
	return meta{}, nil, takeBad, err
}

// delivered records the delivery, then removes the message from the queue. A crash in
// between leaves the sent record, which load uses to drop the queued copy instead of
// re-sending it.
func (d diskStore) delivered(_ context.Context, key string, _ meta, at time.Time) error {
	return errors.Join(d.markSent(key, at), durable.Remove(d.path(queueDir), key+msgExt))
}

func (d diskStore) retry(_ context.Context, key string, m meta, msg []byte) error {
	return d.write(queueDir, key, m, msg)
}

func (d diskStore) park(_ context.Context, key string, m meta, msg []byte) (bool, error) {
	existed := d.exists(failedDir, key+msgExt)
	if err := d.write(failedDir, key, m, msg); err != nil {
		return false, err
	}
	if err := durable.Remove(d.path(queueDir), key+msgExt); err != nil {
		d.log.Error("outbox: remove parked message from queue", slog.String("message_id", m.MessageID), slog.Any("err", err))
	}
	return !existed, nil
}

func (d diskStore) release(context.Context, string, meta) {}

func (d diskStore) prune(_ context.Context, now time.Time) error { return d.pruneSent(now) }

func (d diskStore) rescan() time.Duration { return 0 }

// parked reads failed/: parked records, and the unreadable ones load set aside.
func (d diskStore) parked(context.Context) ([]parkedRecord, error) {
	entries, err := os.ReadDir(d.path(failedDir))
	if err != nil {
		return nil, err
	}
	var recs []parkedRecord
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, durable.TempPrefix) {
			continue
		}
		if key, ok := strings.CutSuffix(name, msgExt); ok {
			m, msg, err := readRecord(filepath.Join(d.path(failedDir), name))
			recs = append(recs, parkedRecord{key: key, m: m, msg: msg, bad: err})
		} else if key, ok := strings.CutSuffix(name, corruptExt); ok {
			recs = append(recs, parkedRecord{key: key, bad: errors.New("the queued record was unreadable")})
		}
	}
	return recs, nil
}

// unpark writes the record into queue/, then removes it from failed/: a crash in between
// leaves it in both, and the queued copy is sent.
func (d diskStore) unpark(_ context.Context, key string, now time.Time) (meta, error) {
	m, msg, err := readRecord(filepath.Join(d.path(failedDir), key+msgExt))
	switch {
	case errors.Is(err, fs.ErrNotExist) && d.exists(failedDir, key+corruptExt):
		return meta{}, errUnreadable
	case errors.Is(err, fs.ErrNotExist):
		return meta{}, ErrNotParked
	case err != nil:
		return meta{}, fmt.Errorf("%w: %w", errUnreadable, err)
	}
	m = fresh(m, now)
	if err := d.write(queueDir, key, m, msg); err != nil {
		return meta{}, err
	}
	return m, durable.Remove(d.path(failedDir), key+msgExt)
}

func (d diskStore) drop(_ context.Context, key string) error {
	found := false
	for _, name := range []string{key + msgExt, key + corruptExt} {
		if d.exists(failedDir, name) {
			found = true
			if err := durable.Remove(d.path(failedDir), name); err != nil {
				return err
			}
		}
	}
	if !found {
		return ErrNotParked
	}
	return nil
}
