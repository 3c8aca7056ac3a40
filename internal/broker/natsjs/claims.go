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
	for {
		m, err := fetchOne(ctx, c.a.claimsConsumer, 5*time.Second)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, broker.ErrNoMessage) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("natsjs: next claim: %w", err)
		}
		t, err := tenant.ParseSubject(string(m.Data()))
		if err != nil {
			_ = m.Term() // a malformed request can never be served
			continue
		}
		c := &claim{t: t, m: m}
		if meta, err := m.Metadata(); err == nil {
			c.at = meta.Timestamp
		}
		return c, nil
	}
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
