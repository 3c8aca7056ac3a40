package awsq

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// fence is the lease a holder's write is conditioned on: t's lease item must carry token and
// not have run out (by the writer's clock, as Renew judges it).
type fence struct {
	t     tenant.ID
	token uint64
}

// writeFenced applies w in one DynamoDB transaction with a condition check on f's lease item,
// so the lease and the write are judged in the same step. ErrLeaseLost when the lease is not
// f's; errWriteCondition (conditionFailed reports it) when w's own condition failed or
// another transaction on the items ran at the same time (re-read and try again).
func (a *adapter) writeFenced(ctx context.Context, f fence, w dtypes.TransactWriteItem) error {
	check := dtypes.TransactWriteItem{ConditionCheck: &dtypes.ConditionCheck{
		TableName:                 aws.String(a.names.leases),
		Key:                       key(f.t.String(), noSK),
		ConditionExpression:       aws.String("#tok = :tok AND expiresAt > :now"),
		ExpressionAttributeNames:  placeholders("#tok"),
		ExpressionAttributeValues: item{":tok": num(int64(f.token)), ":now": num(nowMs())},
	}}
	_, err := a.ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []dtypes.TransactWriteItem{check, w}})
	var tc *dtypes.TransactionCanceledException
	if !errors.As(err, &tc) {
		return err
	}
	if reasons := tc.CancellationReasons; len(reasons) > 0 && aws.ToString(reasons[0].Code) == "ConditionalCheckFailed" {
		return fmt.Errorf("awsq: the lease of %s is not token %d: %w", f.t, f.token, broker.ErrLeaseLost)
	}
	return errWriteCondition
}

// errWriteCondition: a fenced write's own condition failed, or a concurrent transaction
// cancelled it. It is a ConditionalCheckFailedException, so conditionFailed reports it.
var errWriteCondition error = &dtypes.ConditionalCheckFailedException{Message: aws.String("awsq: the write's condition failed in a fenced transaction")}

// txJobs is jobs on a DynamoDB with transactions: its records' updates can be fenced.
type txJobs struct{ *jobs }

var _ broker.FencedJobs = txJobs{}

// UpdateFenced is Update whose conditional put runs in one transaction with t's lease check.
func (j txJobs) UpdateFenced(ctx context.Context, id string, t tenant.ID, token uint64, fn func(*broker.JobRecord) error) (broker.JobRecord, error) {
	return broker.UpdateRecord(ctx, j.jobs, id, fn, &broker.Holder{Tenant: t, Token: token})
}

// txDelivery is a delivery on a DynamoDB with transactions: its settles can be fenced.
type txDelivery struct{ *delivery }

var _ broker.FencedDelivery = txDelivery{}

// FencedBy makes d's ledger updates (Ack's and DeadLetter's uncount, Retry's mark) run in one
// transaction with the lease check; the SQS calls after them are not conditioned.
func (d txDelivery) FencedBy(token uint64) broker.Delivery {
	d.fence = &fence{t: d.q.t, token: token}
	return d
}
