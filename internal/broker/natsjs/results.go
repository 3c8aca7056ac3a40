package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
)

type results struct{ a *adapter }

var _ broker.Results = (*results)(nil)

func (r *results) Publish(ctx context.Context, res broker.Result) error {
	data, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("natsjs: encode result %s: %w", res.JobID, err)
	}
	_, err = r.a.js.Publish(ctx, subjResults+res.Tenant.Subject(), data, jetstream.WithMsgID("result-"+res.JobID))
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("natsjs: publish result %s: %w", res.JobID, err))
	}
	return nil
}

func (r *results) Next(ctx context.Context) (broker.ResultDelivery, error) {
	return nextMsg(ctx, r.a.resultsConsumer, "result", func(m jetstream.Msg) (broker.ResultDelivery, error) {
		d := &resultDelivery{m: m, attempt: 1}
		if err := json.Unmarshal(m.Data(), &d.res); err != nil {
			return nil, err
		}
		if meta, err := m.Metadata(); err == nil {
			d.attempt = int(meta.NumDelivered)
		}
		return d, nil
	})
}

type resultDelivery struct {
	res     broker.Result
	m       jetstream.Msg
	attempt int
}

func (d *resultDelivery) Result() broker.Result { return d.res }
func (d *resultDelivery) Attempt() int          { return d.attempt }

func (d *resultDelivery) Ack(ctx context.Context) error {
	err := d.m.Ack()
	if err != nil && !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
		return fmt.Errorf("natsjs: ack result %s: %w", d.res.JobID, err)
	}
	return nil
}
