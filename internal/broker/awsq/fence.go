package awsq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/retry"
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
// f's; errWriteCondition (conditionFailed reports it) when w's own condition failed. A
// transaction cancelled by a concurrent write to one of its items (a renewal of the lease, a
// publish counting a job in the ledger) is tried again, up to maxTxTries times.
func (a *adapter) writeFenced(ctx context.Context, f fence, w dtypes.TransactWriteItem) error {
	var err error
	for try := 1; ; try++ {
		err = a.transactFenced(ctx, f, w)
		if !errors.Is(err, errTxConflict) || try == maxTxTries {
			return err
		}
		if err := retry.Sleep(ctx, time.Duration(try*try)*10*time.Millisecond); err != nil {
			return err
		}
	}
}

// maxTxTries bounds writeFenced's attempts when concurrent writes cancel its transaction.
const maxTxTries = 5

// errTxConflict: a concurrent write to one of the transaction's items cancelled it.
var errTxConflict = errors.New("awsq: a concurrent write cancelled the transaction; try again")

func (a *adapter) transactFenced(ctx context.Context, f fence, w dtypes.TransactWriteItem) error {
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
	codes := make([]string, len(tc.CancellationReasons))
	for i, r := range tc.CancellationReasons {
		codes[i] = aws.ToString(r.Code)
	}
	switch {
	case len(codes) > 0 && codes[0] == "ConditionalCheckFailed":
		return fmt.Errorf("awsq: the lease of %s is not token %d: %w", f.t, f.token, broker.ErrLeaseLost)
	case len(codes) > 1 && codes[1] == "ConditionalCheckFailed":
		return errWriteCondition
	case slices.Contains(codes, "TransactionConflict"):
		return errTxConflict
	}
	return err
}

// errWriteCondition: a fenced write's own condition failed. It is a ConditionalCheckFailedException, so conditionFailed reports it.
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

// txResults is results on a DynamoDB with transactions: a holder's publish is fenced.
type txResults struct{ *results }

var _ broker.FencedResults = txResults{}

// PublishFenced marks r's job record with the holder's token ("pub") in one transaction with
// t's lease check, and sends r only when that committed: a stale holder's result is refused
// by DynamoDB and never reaches the queue. SQS has no conditional send, so a holder whose
// lease runs out between the transaction and the send still sends; the router acts on the
// result in the job's final record (a fenced write), not on the message's copy.
func (rs txResults) PublishFenced(ctx context.Context, t tenant.ID, token uint64, r broker.Result) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := rs.a.writeFenced(ctx, fence{t: t, token: token}, dtypes.TransactWriteItem{Update: &dtypes.Update{
		TableName:                 aws.String(rs.a.names.jobs),
		Key:                       jobKey(r.JobID),
		UpdateExpression:          aws.String("SET pub = :tok"),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeValues: item{":tok": num(int64(token))},
	}})
	switch {
	case errors.Is(err, broker.ErrLeaseLost):
		return err
	case conditionFailed(err):
		return fmt.Errorf("awsq: publish the result of %s: no record of the job: %w", r.JobID, broker.ErrNotFound)
	case err != nil:
		return ctxErr(ctx, fmt.Errorf("awsq: publish the result of %s: %w", r.JobID, err))
	}
	return rs.Publish(ctx, r)
}
