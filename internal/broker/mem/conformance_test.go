package mem_test

import (
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/brokertest"
	"github.com/webordinary/webordinary/internal/broker/mem"
)

func TestConformance(t *testing.T) {
	brokertest.Run(t, brokertest.Harness{
		New: func(t *testing.T) *broker.Backend {
			b := mem.New(mem.Config{ClaimAckWait: 500 * time.Millisecond})
			t.Cleanup(func() { _ = b.Close() })
			return b
		},
		// mem takes any positive ttl; a quarter second keeps the renewal tests meaningful on a
		// loaded machine (renewals every third of it) and the suite short.
		MinLeaseTTL:     250 * time.Millisecond,
		ExpiryLag:       0, // expiry is exact
		ClaimRedelivery: 500 * time.Millisecond,
		NewPeers: func(t *testing.T) (*broker.Backend, *broker.Backend) {
			e := mem.NewEngine(mem.Config{ClaimAckWait: 500 * time.Millisecond})
			t.Cleanup(func() { _ = e.Close() })
			return e.Connect(), e.Connect()
		},
	})
}
