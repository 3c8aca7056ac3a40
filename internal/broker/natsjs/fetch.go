package natsjs

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/retry"
)

// fetchOne pulls one message from c, waiting at most wait (and never past ctx's deadline).
// It returns broker.ErrNoMessage when nothing came, and ctx.Err() unwrapped when ctx ended.
//
// The server's expiry of the pull decides, not a timer here: the client waits for the
// server's answer (a message, or its "expired" status). A pull the client gave up on by its
// own clock could still be answered with a message a moment later, by a server whose clock
// for the pull started later (it got the request late, under load); that message would go
// to a closed inbox and stay unacknowledged for the consumer's whole AckWait (seen in bench
// when tenants' queues were consumers with one delivery in flight each: a tenant stopped
// for 15 s). Only ctx ending cuts the wait short.
//
// A pull answered "no responders" (a consumer that no server here can reach yet: one just
// made on a cluster, or one whose leader was lost) is pulled again, backing off, while the
// wait lasts; nats.ErrNoResponders is returned only when it is still the answer at the end.
func fetchOne(ctx context.Context, c jetstream.Consumer, wait time.Duration) (jetstream.Msg, error) {
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left <= 0 {
			<-ctx.Done() // the deadline has passed; its timer is about to fire
			return nil, ctx.Err()
		}
		wait = min(wait, left*9/10) // the server's answer has time to come back
	}
	end := time.Now().Add(wait)
	for backoff := 5 * time.Millisecond; ; backoff = min(2*backoff, 100*time.Millisecond) {
		m, err := fetchUntil(ctx, c, wait)
		if !errors.Is(err, nats.ErrNoResponders) || time.Until(end) < backoff+time.Millisecond {
			return m, err
		}
		if err := retry.Sleep(ctx, backoff); err != nil {
			return nil, err
		}
		wait = time.Until(end)
	}
}

// fetchUntil is one pull of fetchOne's.
func fetchUntil(ctx context.Context, c jetstream.Consumer, wait time.Duration) (jetstream.Msg, error) {
	if wait < time.Millisecond {
		return fetchNoWait(ctx, c)
	}
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(wait))
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	select {
	case m, ok := <-batch.Messages():
		if ok {
			return m, nil
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	return nil, broker.ErrNoMessage
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
	// "No responders" (and any other failure) is told, as fetchUntil tells it: fetchOne's last
	// pull is one of these when less than a millisecond of the wait is left, and a consumer
	// no server answers for must not pass for an empty one (its replacement would never come).
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	return nil, broker.ErrNoMessage
}
