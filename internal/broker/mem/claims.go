package mem

import (
	"context"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// claims is the shared claims queue. Requests are never de-duplicated.
type claims struct{ c *conn }

var _ broker.Claims = (*claims)(nil)

func (cl *claims) Request(ctx context.Context, t tenant.ID) error {
	if err := cl.c.check(ctx); err != nil {
		return err
	}
	cl.c.e.claims.push("", t)
	return nil
}

func (cl *claims) Next(ctx context.Context) (broker.Claim, error) {
	it, _, err := cl.c.e.claims.next(ctx, cl.c)
	if err != nil {
		return nil, err
	}
	return &claim{c: cl.c, it: it}, nil
}

func (cl *claims) Waiting(ctx context.Context) (int, error) {
	if err := cl.c.check(ctx); err != nil {
		return 0, err
	}
	return cl.c.e.claims.waiting(), nil
}

type claim struct {
	c  *conn
	it *ackItem[tenant.ID]
}

func (c *claim) Tenant() tenant.ID      { return c.it.v }
func (c *claim) RequestedAt() time.Time { return c.it.at }

func (c *claim) Ack(ctx context.Context) error {
	if err := c.c.check(ctx); err != nil {
		return err
	}
	c.c.e.claims.ack(c.it)
	return nil
}
