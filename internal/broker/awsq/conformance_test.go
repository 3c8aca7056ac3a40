package awsq_test

import (
	"os"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/awstest"
	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/awsq/awsqtest"
	"github.com/webordinary/webordinary/internal/broker/brokertest"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

func harness(ddb awsqtest.DynamoDB) brokertest.Harness {
	return brokertest.Harness{
		New: func(t *testing.T) *broker.Backend {
			return awsqtest.New(t, awsqtest.Options{DynamoDB: ddb})
		},
		MinLeaseTTL: time.Second,
		// The clock-skew allowance (100 ms) plus room for a loaded machine.
		ExpiryLag: 300 * time.Millisecond,
		// awsqtest sets ClaimAckWait to 2s.
		ClaimRedelivery: 2 * time.Second,
		ReadFenced:      readFenced(ddb),
		NewPeers: func(t *testing.T) (*broker.Backend, *broker.Backend) {
			cfg := awsqtest.Config(t, awsqtest.Options{DynamoDB: ddb})
			return awsqtest.Open(t, cfg), awsqtest.Open(t, cfg)
		},
	}
}

// readFenced is what awsq fences by a lease read only on ddb: everything on dynalite, which
// has no transactions. On DynamoDB a transaction conditions each write on the lease item (a
// result's before its SQS send).
func readFenced(ddb awsqtest.DynamoDB) brokertest.Writes {
	if ddb == awsqtest.Dynalite {
		return brokertest.RecordWrites | brokertest.ResultWrites | brokertest.Settles
	}
	return 0
}

// TestConformance runs the broker suite on fauxqs + dynalite.
func TestConformance(t *testing.T) { brokertest.Run(t, harness(awsqtest.Dynalite)) }

// TestConformanceDynamoDBLocal runs the suite with AWS's own DynamoDB Local (the fidelity run).
func TestConformanceDynamoDBLocal(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("fidelity run on DynamoDB Local skipped in -short mode and under -race (the plain run does it)")
	}
	brokertest.Run(t, harness(awsqtest.DynamoDBLocal))
}
