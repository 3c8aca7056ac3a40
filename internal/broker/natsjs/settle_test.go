package natsjs

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestClusterNotReadyIsWaitedOut: the answers a cluster gives while it forms are tried again
// by settle; others are returned. 10008 ("JetStream system temporarily unavailable") failed
// TestEmbeddedEnginesFormACluster's setup once.
func TestClusterNotReadyIsWaitedOut(t *testing.T) {
	api := func(code jetstream.ErrorCode, desc string) error {
		return fmt.Errorf("stream WO_IN: %w", &jetstream.APIError{Code: 503, ErrorCode: code, Description: desc})
	}
	for _, c := range []struct {
		err  error
		wait bool
	}{
		{context.DeadlineExceeded, true},
		{api(10005, "no suitable peers for placement"), true},
		{api(10023, "insufficient resources"), true},
		{api(10008, "JetStream system temporarily unavailable"), true},
		{api(10039, "JetStream not enabled for account"), false},
		{fmt.Errorf("some other failure"), false},
	} {
		if got := clusterNotReady(c.err); got != c.wait {
			t.Errorf("clusterNotReady(%v) = %v; want %v", c.err, got, c.wait)
		}
	}
}
