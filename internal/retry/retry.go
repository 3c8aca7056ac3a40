// Package retry tries a request to the engine again while the engine does not answer: a
// cluster that lost a node answers nothing until it has elected new leaders, each raft
// group after its own 4–9 s (nats-server) or 2.5–4.5 s (webordinary's embedded members).
package retry

import (
	"context"
	"time"
)

// Each bounds one try: a request sent during an election may otherwise wait out the
// client's whole default timeout (5 s) and miss the first answer after it.
const Each = 2 * time.Second

// Sleep waits d, or until ctx ends: then it returns ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Do calls try until it succeeds, stop says its error needs no other try, or ctx ends or
// leaves too little time for another try (ctx's deadline bounds all the tries). Each try
// gets a context bounded by Each; the waits between tries double from 100 ms to 1 s. again,
// when not nil, is told each error that is tried again (a log line). Do returns try's last
// error, nil when it succeeded.
func Do(ctx context.Context, try func(context.Context) error, stop func(error) bool, again func(error)) error {
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		tctx, cancel := context.WithTimeout(ctx, Each)
		err := try(tctx)
		cancel()
		if err == nil || ctx.Err() != nil || stop != nil && stop(err) {
			return err
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < backoff+Each/4 {
			return err
		}
		if again != nil {
			again(err)
		}
		if Sleep(ctx, backoff) != nil {
			return err
		}
	}
}
