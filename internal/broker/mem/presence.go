package mem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
)

// presenceStore keeps each worker's latest announcement until it expires, exactly at its
// ttl: List leaves out (and drops) what ran out.
type presenceStore struct {
	mu      sync.Mutex
	workers map[string]announcement
}

type announcement struct {
	data    []byte // the broker.WorkerInfo, JSON
	expires time.Time
}

func newPresenceStore() *presenceStore {
	return &presenceStore{workers: map[string]announcement{}}
}

type presence struct{ c *conn }

var _ broker.Presence = (*presence)(nil)

func (p *presence) Announce(ctx context.Context, w broker.WorkerInfo, ttl time.Duration) error {
	if err := p.c.check(ctx); err != nil {
		return err
	}
	if ttl <= 0 {
		return errors.New("mem: announcement ttl must be positive")
	}
	data, err := json.Marshal(w)
	if err != nil {
		return fmt.Errorf("mem: encode worker %s: %w", w.ID, err)
	}
	s := p.c.e.presence
	s.mu.Lock()
	defer s.mu.Unlock()
	s.workers[w.ID] = announcement{data: data, expires: time.Now().Add(ttl)}
	return nil
}

func (p *presence) Leave(ctx context.Context, id string) error {
	if err := p.c.check(ctx); err != nil {
		return err
	}
	s := p.c.e.presence
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.workers, id)
	return nil
}

func (p *presence) List(ctx context.Context) ([]broker.WorkerInfo, error) {
	if err := p.c.check(ctx); err != nil {
		return nil, err
	}
	s := p.c.e.presence
	s.mu.Lock()
	now := time.Now()
	var live [][]byte
	for id, a := range s.workers {
		if now.Before(a.expires) {
			live = append(live, a.data)
		} else {
			delete(s.workers, id)
		}
	}
	s.mu.Unlock()
	out := make([]broker.WorkerInfo, 0, len(live))
	for _, data := range live {
		var w broker.WorkerInfo
		if err := json.Unmarshal(data, &w); err != nil {
			return nil, fmt.Errorf("mem: decode worker: %w", err)
		}
		out = append(out, w)
	}
	return out, nil
}
