package brokertest

import (
	"context"
	"testing"
	"time"
)

// eventually polls cond until it returns nil, and fails the test with cond's last error when
// within has passed first.
func eventually(t *testing.T, within time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", within, err)
		}
		time.Sleep(pollEvery)
	}
}

// withTimeout returns a child of ctx that ends after d, cancelled with the test.
func withTimeout(t *testing.T, ctx context.Context, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	t.Cleanup(cancel)
	return ctx
}

// cleanupContext bounds a cleanup step; the test's own context has already ended by then.
func cleanupContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), cleanupTimeout)
}
