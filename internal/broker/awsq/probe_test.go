package awsq_test

import (
	"testing"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/awsq/awsqtest"
)

// TestAnEmulatorWithoutTransactionsIsDetected: on dynalite (no TransactWriteItems), a backend
// not told so finds out at start and fences by lease reads: its records are not FencedJobs.
func TestAnEmulatorWithoutTransactionsIsDetected(t *testing.T) {
	t.Parallel()
	cfg := awsqtest.Config(t, awsqtest.Options{})
	cfg.NoTransactions = false
	b := awsqtest.Open(t, cfg)
	if _, ok := b.Jobs.(broker.FencedJobs); ok {
		t.Fatal("records are FencedJobs on an emulator without transactions")
	}
}

// TestDynamoDBLocalFencesInTransactions: AWS's own emulator has transactions, and the probe
// at start leaves them on: records are FencedJobs.
func TestDynamoDBLocalFencesInTransactions(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("DynamoDB Local skipped in -short mode and under -race (the plain run does it)")
	}
	t.Parallel()
	b := awsqtest.New(t, awsqtest.Options{DynamoDB: awsqtest.DynamoDBLocal})
	if _, ok := b.Jobs.(broker.FencedJobs); !ok {
		t.Fatal("records are not FencedJobs on DynamoDB Local")
	}
}
