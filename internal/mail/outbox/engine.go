package outbox

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
)

// The engine keeps an outbox in three tables and a blob store, all keyed by spoolKey:
//
//	table outbox         queued messages: an entry (meta and claim) per message
//	table outbox_sent    when a message was delivered (RFC 3339), kept for sentMemory
//	table outbox_failed  parked messages' metas, with their errors
//	blobs outbox         the messages themselves, queued and parked, each under
//	                     <key>/<random>: a serve queueing the same message again never
//	                     overwrites one another serve is reading
const (
	engineQueue  = "outbox"
	engineSent   = "outbox_sent"
	engineFailed = "outbox_failed"
	engineBodies = "outbox"
)

// Engine keeps an outbox in the engine every serve shares (broker tables and blobs: DynamoDB
// and S3 on AWS, JetStream on NATS) instead of a spool directory, so what serve must send
// outlives the serve and its disk: any serve on the engine sends what another queued and
// left. A serve claims a message before sending it (a compare-and-set on its entry, for a
// lease), so two serves never send one message at once; a dead serve's claim ends with its
// lease and another serve takes the message over. Open one with OpenEngine.
type Engine struct {
	// Queue, Sent and Failed are the outbox's tables, Bodies its blob store (see OpenEngine).
	Queue, Sent, Failed broker.Table
	Bodies              broker.Blobs
	// Lease is how long a claim lasts; a send is cut off at half of it so that it ends while
	// the claim is live. Default 5 minutes.
	Lease time.Duration
	// Scan is how often the queue is read to find what other serves queued and left (a
	// stopped serve's messages). Default 30 seconds.
	Scan time.Duration
	// Owner names this outbox in its claims. Default: host name and a random suffix.
	Owner string
}

// OpenEngine opens an outbox's tables and blob store on b.
func OpenEngine(ctx context.Context, b *broker.Backend) (*Engine, error) {
	e := &Engine{}
	var err error
	for _, t := range []struct {
		tb   *broker.Table
		name string
	}{{&e.Queue, engineQueue}, {&e.Sent, engineSent}, {&e.Failed, engineFailed}} {
		if *t.tb, err = b.Table(ctx, t.name); err != nil {
			return nil, fmt.Errorf("outbox: open the engine's table %s: %w", t.name, err)
		}
	}
	if e.Bodies, err = b.Blobs(ctx, engineBodies); err != nil {
		return nil, fmt.Errorf("outbox: open the engine's blob store %s: %w", engineBodies, err)
	}
	return e, nil
}

func (e *Engine) lease() time.Duration { return cmp.Or(e.Lease, 5*time.Minute) }
func (e *Engine) scan() time.Duration  { return cmp.Or(e.Scan, 30*time.Second) }

func (e *Engine) validate() error {
	if e.Queue == nil || e.Sent == nil || e.Failed == nil || e.Bodies == nil {
		return errors.New("outbox: Engine needs its tables and blob store (use OpenEngine)")
	}
	return nil
}

// entry is a queued message's record in the engine: its meta, where its message is, and who
// holds it until when.
type entry struct {
	meta
	Body  string    `json:"body"`
	Owner string    `json:"owner,omitempty"`
	Until time.Time `json:"until,omitzero"`
}

// failedRecord is a parked message's record in the engine.
type failedRecord struct {
	meta
	Body string `json:"body,omitempty"`
}

// engineStore is an Engine as an outbox's store.
type engineStore struct {
	e     *Engine
	owner string
	now   func() time.Time
	log   *slog.Logger

	mu     sync.Mutex
	claims map[string]claim // by key
}

// claim is this outbox's claim on an entry: the entry's version, and where its message is.
type claim struct {
	ver  uint64
	body string
}

var _ store = (*engineStore)(nil)

func newEngineStore(e *Engine, now func() time.Time, log *slog.Logger) *engineStore {
	owner := e.Owner
	if owner == "" {
		host, _ := os.Hostname()
		owner = host + "-" + rand.Text()[:8]
	}
	return &engineStore{e: e, owner: owner, now: now, log: log, claims: map[string]claim{}}
}

// load reads every queued entry (an unreadable one is parked) and counts the parked ones.
// A claimed entry's NextAt is when its claim ends, if later.
func (s *engineStore) load(ctx context.Context) (map[string]meta, int, error) {
	keys, err := s.e.Queue.Keys(ctx)
	if err != nil {
		return nil, 0, err
	}
	queued := make(map[string]meta, len(keys))
	for _, key := range keys {
		data, _, err := s.e.Queue.Get(ctx, key)
		if errors.Is(err, broker.ErrNotFound) {
			continue // sent or parked since Keys
		} else if err != nil {
			return nil, 0, err
		}
		en, err := decodeEntry(data)
		if err != nil {
			s.log.ErrorContext(ctx, "outbox: unreadable queued message parked", slog.String("key", key), slog.Any("err", err))
			s.parkUnreadable(ctx, key, meta{}, err)
			continue
		}
		queued[key] = en.due(s.owner)
	}
	failed, err := s.e.Failed.Keys(ctx)
	return queued, len(failed), err
}

func decodeEntry(data []byte) (entry, error) {
	var en entry
	if err := json.Unmarshal(data, &en); err != nil {
		return entry{}, fmt.Errorf("outbox entry: %w", err)
	}
	return en, nil
}

// due is the entry's meta with NextAt no earlier than the end of another owner's claim.
func (en entry) due(owner string) meta {
	m := en.meta
	if en.Owner != "" && en.Owner != owner && en.Until.After(m.NextAt) {
		m.NextAt = en.Until
	}
	return m
}

// add stores the message, then its entry: an entry's message is always there.
func (s *engineStore) add(ctx context.Context, key string, m meta, msg []byte) (bool, error) {
	if at, ok, err := s.sentAt(ctx, key); err != nil {
		return false, err
	} else if ok && m.Enqueued.Sub(at) <= sentMemory {
		return false, nil
	}
	body := key + "/" + strings.ToLower(rand.Text())
	if _, err := s.e.Bodies.Put(ctx, body, msg); err != nil {
		return false, err
	}
	data, err := json.Marshal(entry{meta: m, Body: body})
	if err != nil {
		return false, err
	}
	_, err = s.e.Queue.Create(ctx, key, data)
	if err == nil {
		return true, nil
	}
	if derr := s.e.Bodies.Delete(ctx, body); derr != nil {
		s.log.WarnContext(ctx, "outbox: remove an unqueued message from the engine", slog.String("body", body), slog.Any("err", derr))
	}
	if errors.Is(err, broker.ErrExists) {
		return false, nil // queued by another serve: the same message under the same Message-ID
	}
	return false, err
}

// sentAt returns when key was delivered, if the engine remembers.
func (s *engineStore) sentAt(ctx context.Context, key string) (time.Time, bool, error) {
	data, _, err := s.e.Sent.Get(ctx, key)
	if errors.Is(err, broker.ErrNotFound) {
		return time.Time{}, false, nil
	} else if err != nil {
		return time.Time{}, false, err
	}
	t, err := time.Parse(time.RFC3339Nano, string(data))
	return t, err == nil, nil
}

// take claims the entry (compare-and-set on its version) when it is due and nobody else's
// claim is live, then reads the message.
func (s *engineStore) take(ctx context.Context, key string) (meta, []byte, takeResult, error) {
	data, ver, err := s.e.Queue.Get(ctx, key)
	if errors.Is(err, broker.ErrNotFound) {
		return meta{}, nil, takeGone, nil
	} else if err != nil {
		return meta{}, nil, takeLater, err
	}
	en, err := decodeEntry(data)
	if err != nil {
		s.parkUnreadable(ctx, key, meta{}, err)
		return meta{}, nil, takeBad, err
	}
	now := s.now()
	if m := en.due(s.owner); m.NextAt.After(now) {
		return m, nil, takeLater, nil
	}
	if at, ok, err := s.sentAt(ctx, key); err != nil {
		return en.meta, nil, takeLater, err
	} else if ok && !at.Before(en.Enqueued) { // delivered just before its sender stopped
		return meta{}, nil, takeGone, s.forget(ctx, key, en.Body)
	}
	en.Owner, en.Until = s.owner, now.Add(s.e.lease())
	if ver, err = s.update(ctx, key, en, ver); errors.Is(err, broker.ErrConflict) {
		m := en.meta
		m.NextAt = now.Add(time.Second) // another serve just claimed or updated it: look again
		return m, nil, takeLater, nil
	} else if err != nil {
		return en.meta, nil, takeLater, err
	}
	s.setClaim(key, claim{ver, en.Body})
	var msg []byte
	if err = broker.ErrNotFound; en.Body != "" {
		msg, _, err = s.e.Bodies.Get(ctx, en.Body)
	}
	switch {
	case errors.Is(err, broker.ErrNotFound):
		err = errors.New("the message is missing from the engine's blob store")
		s.parkUnreadable(ctx, key, en.meta, err)
		return meta{}, nil, takeBad, err
	case err != nil:
		s.release(ctx, key, en.meta)
		return en.meta, nil, takeLater, err
	}
	return en.meta, msg, takeSend, nil
}

func (s *engineStore) update(ctx context.Context, key string, en entry, ver uint64) (uint64, error) {
	data, err := json.Marshal(en)
	if err != nil {
		return 0, err
	}
	return s.e.Queue.Update(ctx, key, data, ver)
}

func (s *engineStore) setClaim(key string, c claim) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claims[key] = c
}

// endClaim returns this outbox's claim on key and forgets it.
func (s *engineStore) endClaim(key string) (claim, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.claims[key]
	delete(s.claims, key)
	return c, ok
}

// delivered records the delivery, then removes the entry and the message. A stop in between
// leaves the sent record, which take uses to drop the entry instead of sending it again.
func (s *engineStore) delivered(ctx context.Context, key string, _ meta, at time.Time) error {
	c, _ := s.endClaim(key)
	if _, err := s.e.Sent.Put(ctx, key, []byte(at.UTC().Format(time.RFC3339Nano))); err != nil {
		return err
	}
	return s.forget(ctx, key, c.body)
}

// forget removes a queued message: its entry, then its body.
func (s *engineStore) forget(ctx context.Context, key, body string) error {
	if err := s.e.Queue.Delete(ctx, key); err != nil {
		return err
	}
	if body == "" {
		return nil
	}
	return s.e.Bodies.Delete(ctx, body)
}

// retry stores m and ends the claim in one compare-and-set; a claim taken over meanwhile
// (this send outlasted the lease) leaves the entry to its new owner.
func (s *engineStore) retry(ctx context.Context, key string, m meta, _ []byte) error {
	c, ok := s.endClaim(key)
	if !ok {
		return errors.New("no claim on the message")
	}
	if _, err := s.update(ctx, key, entry{meta: m, Body: c.body}, c.ver); errors.Is(err, broker.ErrConflict) || errors.Is(err, broker.ErrNotFound) {
		return fmt.Errorf("another serve took the message over: %w", err)
	} else if err != nil {
		return err
	}
	return nil
}

// park stores the meta in the failed table and removes the entry; the message stays in the
// blob store beside it.
func (s *engineStore) park(ctx context.Context, key string, m meta, _ []byte) (bool, error) {
	c, _ := s.endClaim(key)
	data, err := json.Marshal(failedRecord{meta: m, Body: c.body})
	if err != nil {
		return false, err
	}
	newly := true
	if _, err := s.e.Failed.Create(ctx, key, data); errors.Is(err, broker.ErrExists) {
		newly = false
		if _, err := s.e.Failed.Put(ctx, key, data); err != nil {
			return false, err
		}
	} else if err != nil {
		return false, err
	}
	if err := s.e.Queue.Delete(ctx, key); err != nil {
		s.log.ErrorContext(ctx, "outbox: remove parked message from the engine's queue", slog.String("message_id", m.MessageID), slog.Any("err", err))
	}
	return newly, nil
}

// parkUnreadable parks an entry that cannot be read or sent, with m (what is known of it)
// saying why.
func (s *engineStore) parkUnreadable(ctx context.Context, key string, m meta, cause error) {
	m.LastError = cause.Error()
	if _, err := s.park(ctx, key, m, nil); err != nil {
		s.log.ErrorContext(ctx, "outbox: park unreadable message", slog.String("key", key), slog.Any("err", err))
	}
}

// release ends the claim without an attempt, so another serve need not wait out the lease.
// It runs while the outbox stops, so not on ctx.
func (s *engineStore) release(ctx context.Context, key string, m meta) {
	c, ok := s.endClaim(key)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := s.update(ctx, key, entry{meta: m, Body: c.body}, c.ver); err != nil {
		s.log.WarnContext(ctx, "outbox: release claim", slog.String("message_id", m.MessageID), slog.Any("err", err))
	}
}

// prune forgets deliveries older than sentMemory (and unreadable records).
func (s *engineStore) prune(ctx context.Context, now time.Time) error {
	keys, err := s.e.Sent.Keys(ctx)
	if err != nil {
		return err
	}
	for _, key := range keys {
		if at, ok, err := s.sentAt(ctx, key); err != nil {
			return err
		} else if !ok || now.Sub(at) > sentMemory {
			if err := s.e.Sent.Delete(ctx, key); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *engineStore) rescan() time.Duration { return s.e.scan() }

// parked reads the failed table and each parked message's body.
func (s *engineStore) parked(ctx context.Context) ([]parkedRecord, error) {
	keys, err := s.e.Failed.Keys(ctx)
	if err != nil {
		return nil, err
	}
	recs := make([]parkedRecord, 0, len(keys))
	for _, key := range keys {
		rec, err := s.parkedOne(ctx, key)
		if errors.Is(err, ErrNotParked) {
			continue // retried or dropped since Keys
		} else if err != nil {
			return nil, err
		}
		recs = append(recs, rec.parkedRecord)
	}
	return recs, nil
}

// enginePark is a parked record with where its body is.
type enginePark struct {
	parkedRecord
	body string
}

// parkedOne reads key's parked record and its message: ErrNotParked when there is none; an
// unreadable record or a missing message is returned with its bad set.
func (s *engineStore) parkedOne(ctx context.Context, key string) (enginePark, error) {
	data, _, err := s.e.Failed.Get(ctx, key)
	if errors.Is(err, broker.ErrNotFound) {
		return enginePark{}, ErrNotParked
	} else if err != nil {
		return enginePark{}, err
	}
	var fr failedRecord
	if err := json.Unmarshal(data, &fr); err != nil {
		return enginePark{parkedRecord: parkedRecord{key: key, bad: fmt.Errorf("parked record: %w", err)}}, nil
	}
	rec := enginePark{parkedRecord: parkedRecord{key: key, m: fr.meta}, body: fr.Body}
	if fr.Body == "" {
		rec.bad = errors.New("the message is missing from the engine's blob store")
		return rec, nil
	}
	rec.msg, _, err = s.e.Bodies.Get(ctx, fr.Body)
	if errors.Is(err, broker.ErrNotFound) {
		rec.bad = errors.New("the message is missing from the engine's blob store")
	} else if err != nil {
		return enginePark{}, err
	}
	return rec, nil
}

// unpark queues the parked message again under its body, then removes the parked record. A
// message queued meanwhile under the same key (another serve retried it, or it was queued
// afresh) is left as it is, and the parked copy's body is removed unless it is that one's.
func (s *engineStore) unpark(ctx context.Context, key string, now time.Time) (meta, error) {
	rec, err := s.parkedOne(ctx, key)
	if err != nil {
		return meta{}, err
	}
	if rec.bad != nil {
		return meta{}, fmt.Errorf("%w: %w", errUnreadable, rec.bad)
	}
	m := fresh(rec.m, now)
	data, err := json.Marshal(entry{meta: m, Body: rec.body})
	if err != nil {
		return meta{}, err
	}
	if _, err := s.e.Queue.Create(ctx, key, data); errors.Is(err, broker.ErrExists) {
		if q, _, gerr := s.e.Queue.Get(ctx, key); gerr == nil {
			if en, derr := decodeEntry(q); derr == nil && en.Body != rec.body {
				s.dropBody(ctx, rec.body)
			}
		}
	} else if err != nil {
		return meta{}, err
	}
	return m, s.e.Failed.Delete(ctx, key)
}

// drop removes the parked record, then its message.
func (s *engineStore) drop(ctx context.Context, key string) error {
	rec, err := s.parkedOne(ctx, key)
	if err != nil {
		return err
	}
	if err := s.e.Failed.Delete(ctx, key); err != nil {
		return err
	}
	if rec.body != "" {
		s.dropBody(ctx, rec.body)
	}
	return nil
}

// dropBody removes a message no record points at any more; a failure leaves it orphaned in
// the blob store, which is logged.
func (s *engineStore) dropBody(ctx context.Context, body string) {
	if err := s.e.Bodies.Delete(ctx, body); err != nil && !errors.Is(err, broker.ErrNotFound) {
		s.log.WarnContext(ctx, "outbox: remove a dropped message from the engine", slog.String("body", body), slog.Any("err", err))
	}
}
