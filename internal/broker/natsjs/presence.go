package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
)

type presence struct{ a *adapter }

var _ broker.Presence = (*presence)(nil)

func (p *presence) Announce(ctx context.Context, w broker.WorkerInfo, ttl time.Duration) error {
	data, _ := json.Marshal(w)
	ttl = max(ttl, time.Second)
	_, err := p.a.js.Publish(ctx, "$KV."+bucketWorkers+"."+w.ID, data, jetstream.WithMsgTTL(ttl))
	return ctxErr(ctx, wrap("announce worker", w.ID, err))
}

func (p *presence) Leave(ctx context.Context, id string) error {
	err := p.a.workers.Delete(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	return ctxErr(ctx, wrap("remove worker", id, err))
}

func (p *presence) List(ctx context.Context) ([]broker.WorkerInfo, error) {
	lister, err := p.a.workers.ListKeys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("natsjs: list workers: %w", err))
	}
	var out []broker.WorkerInfo
	for k := range lister.Keys() {
		e, err := p.a.workers.Get(ctx, k)
		if err != nil {
			continue
		}
		var w broker.WorkerInfo
		if json.Unmarshal(e.Value(), &w) == nil {
			out = append(out, w)
		}
	}
	return out, ctx.Err()
}
