package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/retry"
)

// TestATryThatHangsIsCutShort: a try the engine never answers ends after retry.Each and is
// tried again, so an answer that comes later is not missed by a request still waiting.
func TestATryThatHangsIsCutShort(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*retry.Each)
	defer cancel()
	tries := 0
	err := retry.Do(ctx, func(tctx context.Context) error {
		tries++
		if tries == 1 {
			<-tctx.Done() // unanswered
			return tctx.Err()
		}
		return nil
	}, nil, nil)
	if err != nil || tries != 2 {
		t.Fatalf("after a hanging try: %v in %d tries; want success at the second", err, tries)
	}
}

// TestStopEndsTheTries: an error stop says needs no other try is returned at once; others
// are tried again (and told to again) until the deadline leaves no time for another.
func TestStopEndsTheTries(t *testing.T) {
	t.Parallel()
	held := errors.New("held")
	tries := 0
	err := retry.Do(context.Background(), func(context.Context) error { tries++; return held },
		func(err error) bool { return errors.Is(err, held) }, nil)
	if !errors.Is(err, held) || tries != 1 {
		t.Fatalf("stop: %v in %d tries; want held in 1", err, tries)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	tries, agains := 0, 0
	down := errors.New("no response from stream")
	err = retry.Do(ctx, func(context.Context) error { tries++; return down }, nil, func(error) { agains++ })
	if !errors.Is(err, down) || tries < 3 || agains != tries-1 || ctx.Err() != nil {
		t.Fatalf("%v in %d tries (%d told again), deadline passed %v; want several tries, each but the last told, ending before the deadline",
			err, tries, agains, ctx.Err() != nil)
	}
}
