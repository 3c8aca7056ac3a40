package natsjs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// signals rides on core NATS: no storage, microseconds, and lost when nobody listens, which
// the Signals contract allows.
type signals struct{ nc *nats.Conn }

var _ broker.Signals = (*signals)(nil)

func (s *signals) Interrupt(ctx context.Context, t tenant.ID, in broker.Interrupt) error {
	data, _ := json.Marshal(in)
	if err := s.nc.Publish(subjSignals+t.Subject(), data); err != nil {
		return fmt.Errorf("natsjs: interrupt %s: %w", t, err)
	}
	return nil
}

func (s *signals) Watch(ctx context.Context, t tenant.ID) (<-chan broker.Interrupt, func(), error) {
	ch := make(chan broker.Interrupt, 16)
	sub, err := s.nc.Subscribe(subjSignals+t.Subject(), func(m *nats.Msg) {
		var in broker.Interrupt
		if json.Unmarshal(m.Data, &in) != nil {
			return
		}
		select {
		case ch <- in:
		default: // a full buffer already holds an interrupt; more say nothing new
		}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("natsjs: watch %s: %w", t, err)
	}
	// Flush so the subscription is registered before Watch returns.
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.nc.FlushWithContext(fctx); err != nil {
		_ = sub.Unsubscribe()
		return nil, nil, ctxErr(ctx, fmt.Errorf("natsjs: watch %s: %w", t, err))
	}
	return ch, func() { _ = sub.Unsubscribe() }, nil
}
