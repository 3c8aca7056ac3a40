package natsjs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// claims publishes claim requests without a message id: JetStream de-duplication would
// otherwise swallow a legitimate repeat request inside its window.
type claims struct{ a *adapter }

var _ broker.Claims = (*claims)(nil)

func (c *claims) Request(ctx context.Context, t tenant.ID) error {
	_, err := c.a.js.Publish(ctx, subjClaims, []byte(t.Subject()))
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("natsjs: request claim %s: %w", t, err))
	}
	return nil
}

func (c *claims) Next(ctx context.Context) (broker.Claim, error) {
	return nextMsg(ctx, c.a.claimsConsumer, "claim", func(m jetstream.Msg) (broker.Claim, error) {
		t, err := tenant.ParseSubject(string(m.Data()))
		if err != nil {
			return nil, err
		}
		cl := &claim{t: t, m: m}
		if meta, err := m.Metadata(); err == nil {
			cl.at = meta.Timestamp
		}
		return cl, nil
	})
}

func (c *claims) Waiting(ctx context.Context) (int, error) {
	info, err := c.a.claimsConsumer.Info(ctx)
	if err != nil {
		return 0, ctxErr(ctx, fmt.Errorf("natsjs: claims waiting: %w", err))
	}
	return int(info.NumPending), nil
}

type claim struct {
	t  tenant.ID
	m  jetstream.Msg
	at time.Time
}

func (c *claim) Tenant() tenant.ID      { return c.t }
func (c *claim) RequestedAt() time.Time { return c.at }

func (c *claim) Ack(ctx context.Context) error {
	err := c.m.Ack()
	if err != nil && !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
		return fmt.Errorf("natsjs: ack claim %s: %w", c.t, err)
	}
	return nil
}
