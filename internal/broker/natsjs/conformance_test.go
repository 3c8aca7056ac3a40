package natsjs_test

import (
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/brokertest"
	"github.com/webordinary/webordinary/internal/broker/natsjs/natsjstest"
)

func TestConformance(t *testing.T) {
	brokertest.Run(t, brokertest.Harness{
		New: func(t *testing.T) *broker.Backend {
			return natsjstest.Start(t, natsjstest.Options{}).Backend
		},
		MinLeaseTTL: time.Second,
		ExpiryLag:   300 * time.Millisecond,
		// natsjstest sets ClaimAckWait to 2s.
		ClaimRedelivery: 2 * time.Second,
		NewPeers: func(t *testing.T) (*broker.Backend, *broker.Backend) {
			env := natsjstest.Start(t, natsjstest.Options{})
			_, other := natsjstest.Connect(t, env)
			return env.Backend, other
		},
	})
}
