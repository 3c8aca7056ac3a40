package mem

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// inboxStore holds every tenant's queue and dead letters under one lock.
type inboxStore struct {
	mu      sync.Mutex
	seq     uint64
	tenants map[tenant.ID]*tenantQueue
	dedup   *dedupWindow
	dlq     map[tenant.ID][]deadLetter
}

func newInboxStore(window time.Duration) *inboxStore {
	return &inboxStore{tenants: map[tenant.ID]*tenantQueue{}, dedup: newDedupWindow(window), dlq: map[tenant.ID][]deadLetter{}}
}

// tenantQueue is one tenant's unacknowledged messages in publish order and its open consumer.
// The consumer's delivery in flight, if any, is always msgs[0]: messages are delivered in
// order, one at a time, and leave only from the front.
type tenantQueue struct {
	msgs     []*message
	consumer *consumer // nil while nobody has the queue open
	changed  notifier
}

type message struct {
	seq   uint64
	jobID string
	data  []byte // the job, JSON
}

// consumer is one Open's view of a tenant queue; Open replaces it, Close removes it.
type consumer struct {
	ackWait time.Duration
	cur     *delivery // unsettled delivery of msgs[0], or nil
	due     time.Time // when cur is delivered again unless extended or settled
	hold    time.Time // after Retry(delay): msgs[0] is not delivered before this
	headSeq uint64    // the message the attempts count is for
	attempt int       // deliveries of headSeq to this consumer
}

type deadLetter struct {
	jobID string
	data  []byte // the broker.DeadLetter, JSON
}

func (s *inboxStore) queue(t tenant.ID) *tenantQueue {
	tq := s.tenants[t]
	if tq == nil {
		tq = &tenantQueue{}
		s.tenants[t] = tq
	}
	return tq
}

type inbox struct{ c *conn }

var _ broker.Inbox = (*inbox)(nil)

func (in *inbox) Publish(ctx context.Context, job broker.Job) error {
	if err := in.c.check(ctx); err != nil {
		return err
	}
	limit := in.c.e.cfg.MaxMessageSize
	data, err := json.Marshal(job)
	if err != nil {
		return fmt.Errorf("mem: encode job %s: %w", job.ID, err)
	}
	if len(data) > limit {
		return tooLarge(len(data), limit)
	}
	s := in.c.e.inbox
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.dedup.add(job.ID, time.Now()) {
		return nil
	}
	s.seq++
	tq := s.queue(job.Tenant)
	tq.msgs = append(tq.msgs, &message{seq: s.seq, jobID: job.ID, data: data})
	tq.changed.fire()
	return nil
}

func tooLarge(size, limit int) error {
	return fmt.Errorf("%w: the job with its attachments is %d MB or more; the engine accepts %d MB (send smaller attachments)",
		broker.ErrTooLarge, size>>20, limit>>20)
}

// Open replaces any consumer left by a previous holder: its unsettled delivery becomes
// available at once, and its Queue and deliveries go stale.
func (in *inbox) Open(ctx context.Context, t tenant.ID, opts broker.QueueOptions) (broker.Queue, error) {
	if err := in.c.check(ctx); err != nil {
		return nil, err
	}
	if opts.AckWait <= 0 {
		opts.AckWait = time.Minute
	}
	s := in.c.e.inbox
	s.mu.Lock()
	defer s.mu.Unlock()
	tq := s.queue(t)
	tq.consumer = &consumer{ackWait: opts.AckWait}
	tq.changed.fire() // wakes a stale queue's Next
	return &queue{c: in.c, t: t, tq: tq, cons: tq.consumer}, nil
}

func (in *inbox) Pending(ctx context.Context, t tenant.ID) (int, error) {
	if err := in.c.check(ctx); err != nil {
		return 0, err
	}
	s := in.c.e.inbox
	s.mu.Lock()
	defer s.mu.Unlock()
	if tq := s.tenants[t]; tq != nil {
		return len(tq.msgs), nil
	}
	return 0, nil
}

func (in *inbox) Tenants(ctx context.Context) (map[tenant.ID]int, error) {
	if err := in.c.check(ctx); err != nil {
		return nil, err
	}
	s := in.c.e.inbox
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[tenant.ID]int{}
	for t, tq := range s.tenants {
		if len(tq.msgs) > 0 {
			out[t] = len(tq.msgs)
		}
	}
	return out, nil
}

func (in *inbox) DeadLetters(ctx context.Context, t tenant.ID) ([]broker.DeadLetter, error) {
	if err := in.c.check(ctx); err != nil {
		return nil, err
	}
	s := in.c.e.inbox
	s.mu.Lock()
	stored := s.dlq[t]
	s.mu.Unlock() // entries are never modified, only replaced: decoding needs no lock
	out := make([]broker.DeadLetter, 0, len(stored))
	for _, e := range stored {
		var dl broker.DeadLetter
		if err := json.Unmarshal(e.data, &dl); err != nil {
			return nil, fmt.Errorf("mem: decode dead letter %s: %w", e.jobID, err)
		}
		out = append(out, dl)
	}
	return out, nil
}

func (in *inbox) RemoveDeadLetter(ctx context.Context, t tenant.ID, jobID string) error {
	if err := in.c.check(ctx); err != nil {
		return err
	}
	s := in.c.e.inbox
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := make([]deadLetter, 0, len(s.dlq[t]))
	for _, e := range s.dlq[t] {
		if e.jobID != jobID {
			kept = append(kept, e)
		}
	}
	s.dlq[t] = kept
	return nil
}

// addDeadLetter stores dl for t unless t already has one for the job (as natsjs de-duplicates
// its dead-letter publish by job id). Called with s.mu held.
func (s *inboxStore) addDeadLetter(t tenant.ID, jobID string, data []byte) {
	for _, e := range s.dlq[t] {
		if e.jobID == jobID {
			return
		}
	}
	// A new slice: DeadLetters may be decoding the old one without the lock.
	s.dlq[t] = append(s.dlq[t][:len(s.dlq[t]):len(s.dlq[t])], deadLetter{jobID: jobID, data: data})
}
