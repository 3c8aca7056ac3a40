package mem

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// results is the results stream, shared by every router; de-duplicated by job id.
type results struct{ c *conn }

var (
	_ broker.Results       = (*results)(nil)
	_ broker.FencedResults = (*results)(nil)
)

func (r *results) Publish(ctx context.Context, res broker.Result) error {
	return r.publish(ctx, res, nil)
}

// PublishFenced publishes while holding the lease store's lock, t's lease checked.
func (r *results) PublishFenced(ctx context.Context, t tenant.ID, token uint64, res broker.Result) error {
	return r.publish(ctx, res, &fence{t: t, token: token})
}

func (r *results) publish(ctx context.Context, res broker.Result, f *fence) error {
	if err := r.c.check(ctx); err != nil {
		return err
	}
	data, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("mem: encode result %s: %w", res.JobID, err)
	}
	if limit := r.c.e.cfg.MaxMessageSize; len(data) > limit {
		return fmt.Errorf("%w: the result of job %s is %d MB; the engine accepts %d MB", broker.ErrTooLarge, res.JobID, len(data)>>20, limit>>20)
	}
	if f != nil {
		unlock, err := r.c.e.leases.hold(f, "result of "+res.JobID)
		if err != nil {
			return err
		}
		defer unlock()
	}
	r.c.e.results.push(res.JobID, data)
	return nil
}

func (r *results) Next(ctx context.Context) (broker.ResultDelivery, error) {
	it, attempt, err := r.c.e.results.next(ctx, r.c)
	if err != nil {
		return nil, err
	}
	d := &resultDelivery{c: r.c, it: it, attempt: attempt}
	if err := json.Unmarshal(it.v, &d.res); err != nil {
		return nil, fmt.Errorf("mem: decode result: %w", err)
	}
	return d, nil
}

type resultDelivery struct {
	c       *conn
	it      *ackItem[[]byte]
	res     broker.Result
	attempt int
}

func (d *resultDelivery) Result() broker.Result { return d.res }
func (d *resultDelivery) Attempt() int          { return d.attempt }

func (d *resultDelivery) Ack(ctx context.Context) error {
	if err := d.c.check(ctx); err != nil {
		return err
	}
	d.c.e.results.ack(d.it)
	return nil
}
