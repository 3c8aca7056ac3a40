package natsjs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
)

// fetchOne pulls one message from c, waiting at most wait (and never past ctx's deadline).
// It returns broker.ErrNoMessage when nothing came, and ctx.Err() unwrapped when ctx ended.
func fetchOne(ctx context.Context, c jetstream.Consumer, wait time.Duration) (jetstream.Msg, error) {
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left <= 0 {
			<-ctx.Done() // the deadline has passed; its timer is about to fire
			return nil, ctx.Err()
		}
		wait = min(wait, left)
	}
	if wait < time.Millisecond {
		return fetchNoWait(ctx, c)
	}
	pctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	m, err := c.Next(jetstream.FetchContext(pctx))
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		if errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrInvalidOption) {
			return nil, broker.ErrNoMessage
		}
		return nil, err
	}
	return m, nil
}

func fetchNoWait(ctx context.Context, c jetstream.Consumer) (jetstream.Msg, error) {
	batch, err := c.FetchNoWait(1)
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	for m := range batch.Messages() {
		return m, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, broker.ErrNoMessage
}

// nextMsg blocks until c delivers a message that decode accepts, or ctx ends. A message
// decode rejects can never be served: it is terminated and the wait goes on. Each pull is
// bounded, so a pull abandoned by a cancelled caller holds a message only briefly.
func nextMsg[T any](ctx context.Context, c jetstream.Consumer, what string, decode func(jetstream.Msg) (T, error)) (T, error) {
	var zero T
	for {
		m, err := fetchOne(ctx, c, 5*time.Second)
		switch {
		case ctx.Err() != nil:
			return zero, ctx.Err()
		case errors.Is(err, broker.ErrNoMessage):
			continue
		case err != nil:
			return zero, fmt.Errorf("natsjs: next %s: %w", what, err)
		}
		if v, err := decode(m); err == nil {
			return v, nil
		}
		_ = m.Term()
	}
}
