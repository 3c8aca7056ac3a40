package awsq

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	qtypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// The inbox is one SQS FIFO queue per tenant plus one ledger item per tenant in the inbox table
// (pk = "project/user"):
//
//	pending    string set of the job ids published and not yet acknowledged or dead-lettered
//	opener     the id of the Queue that opened the tenant last
//	hnd        the receipt handle of the delivery handed out last (cleared when it is settled)
//	sentAt     when a publish last began sending, countedAt when one last finished counting
//
// Every crash window leaves a message in SQS that the ledger does not count (found again by its
// owner, or by Tenants' sweep), never a count without a message: publish sends, then counts;
// settling uncounts, then deletes.
type inbox struct{ a *adapter }

var _ broker.Inbox = (*inbox)(nil)

// Fault points of publish and ack (see Config.faults).
const (
	FaultPublishSent  = "publish.sent"  // the message is in SQS, not yet counted
	FaultAckUncounted = "ack.uncounted" // the ledger no longer counts it, SQS still has it
)

func (in *inbox) Publish(ctx context.Context, job broker.Job) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	a := in.a
	body, err := a.wrap(ctx, job.ID, payloadKey(job.Tenant, job.ID), job)
	if err != nil {
		return ctxErr(ctx, err)
	}
	if err := a.ledgerUpdate(ctx, job.Tenant, "SET sentAt = :now", item{":now": num(nowMs())}); err != nil {
		return ctxErr(ctx, fmt.Errorf("awsq: publish %s: %w", job.ID, err))
	}
	if err := in.send(ctx, job, body); err != nil {
		return ctxErr(ctx, fmt.Errorf("awsq: publish %s: %w", job.ID, err))
	}
	if err := a.fault(FaultPublishSent); err != nil {
		return err
	}
	err = a.ledgerUpdate(ctx, job.Tenant, "ADD pending :id SET countedAt = :now", item{":id": set(job.ID), ":now": num(nowMs())})
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("awsq: count %s: %w", job.ID, err))
	}
	return nil
}

// payloadKey is where a job too large for SQS is kept until it is acknowledged.
func payloadKey(t tenant.ID, jobID string) string {
	return "inbox/" + t.String() + "/" + jobID + ".json"
}

// send puts the job on its tenant's queue, creating the queue when it is missing (first job,
// or a queue deleted under us). De-duplicated by job id for SQS's five minutes.
func (in *inbox) send(ctx context.Context, job broker.Job, body string) error {
	name := in.a.names.tenantQueue(job.Tenant)
	for try := 0; ; try++ {
		url, err := in.a.queueURL(ctx, name)
		if err != nil {
			return err
		}
		_, err = in.a.sqs.SendMessage(ctx, &sqs.SendMessageInput{
			QueueUrl:               aws.String(url),
			MessageBody:            aws.String(body),
			MessageGroupId:         aws.String(job.Tenant.String()),
			MessageDeduplicationId: aws.String(job.ID),
		})
		if err == nil || !noSuchQueue(err) || try > 0 {
			return err
		}
		in.a.forgetQueue(name)
		if _, err := in.a.createQueue(ctx, name); err != nil {
			return err
		}
	}
}

// ledgerUpdate applies expr to t's ledger item (creating it).
func (a *adapter) ledgerUpdate(ctx context.Context, t tenant.ID, expr string, values item) error {
	_, err := a.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(a.names.inbox),
		Key:                       key(t.String(), noSK),
		UpdateExpression:          aws.String(expr),
		ExpressionAttributeValues: values,
	})
	return err
}

// ledger reads t's ledger item (nil when there is none).
func (a *adapter) ledger(ctx context.Context, t tenant.ID) (item, error) {
	return a.getItem(ctx, a.names.inbox, key(t.String(), noSK))
}

func (in *inbox) Open(ctx context.Context, t tenant.ID, opts broker.QueueOptions) (broker.Queue, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ackWait := cmp.Or(opts.AckWait, time.Minute)
	q := newQueue(in.a, t, ackWait)
	if err := q.open(ctx); err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("awsq: open %s: %w", t, err))
	}
	return q, nil
}

func (in *inbox) Pending(ctx context.Context, t tenant.ID) (int, error) {
	it, err := in.a.ledger(ctx, t)
	if err != nil {
		return 0, ctxErr(ctx, fmt.Errorf("awsq: pending of %s: %w", t, err))
	}
	return len(getSS(it, "pending")), nil
}

// Tenants scans the ledger. A tenant whose publish has stayed half done for SweepAfter is
// looked up in SQS: a message there that the ledger does not count makes it pending (its owner
// counts it again on delivery); none clears the half-done mark.
func (in *inbox) Tenants(ctx context.Context) (map[tenant.ID]int, error) {
	items, err := in.a.scan(ctx, in.a.names.inbox, func(it item) bool {
		return len(getSS(it, "pending")) > 0 || in.a.halfPublished(it)
	})
	if err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("awsq: tenants: %w", err))
	}
	out := map[tenant.ID]int{}
	for _, it := range items {
		t, err := tenant.Parse(getS(it, attrPK))
		if err != nil {
			continue
		}
		n := len(getSS(it, "pending"))
		if in.a.halfPublished(it) {
			n = max(n, in.a.sweep(ctx, t, it))
		}
		if n > 0 {
			out[t] = n
		}
	}
	return out, ctxErr(ctx, nil)
}

// halfPublished reports whether a publish began longer than SweepAfter ago and has not been
// counted since.
func (a *adapter) halfPublished(it item) bool {
	sent := getN(it, "sentAt")
	return sent > getN(it, "countedAt") && time.Since(time.UnixMilli(sent)) > a.cfg.SweepAfter
}

// sweep counts the messages in t's queue; when there are none, it clears the half-done mark
// (only if no publish began since).
func (a *adapter) sweep(ctx context.Context, t tenant.ID, it item) int {
	n, err := a.queueDepth(ctx, a.names.tenantQueue(t))
	if err != nil {
		a.cfg.Logger.Warn("awsq: sweep", "tenant", t.String(), "err", err)
		return 0
	}
	if n == 0 {
		_, _ = a.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(a.names.inbox), Key: key(t.String(), noSK),
			UpdateExpression:          aws.String("SET countedAt = :sent"),
			ConditionExpression:       aws.String("sentAt = :sent"),
			ExpressionAttributeValues: item{":sent": it["sentAt"]},
		})
	}
	return n
}

// queueDepth is SQS's count of a queue's messages, visible and in flight (approximate on AWS).
// A queue that does not exist holds nothing (and is not created by looking).
func (a *adapter) queueDepth(ctx context.Context, name string) (int, error) {
	url, err := a.existingQueueURL(ctx, name)
	if err != nil || url == "" {
		return 0, err
	}
	out, err := a.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []qtypes.QueueAttributeName{
			qtypes.QueueAttributeNameApproximateNumberOfMessages,
			qtypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			qtypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, v := range out.Attributes {
		c, _ := strconv.Atoi(v)
		n += c
	}
	return n, nil
}

func (in *inbox) DeadLetters(ctx context.Context, t tenant.ID) ([]broker.DeadLetter, error) {
	items, err := in.a.queryPK(ctx, in.a.names.deadLetters, t.String())
	if err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("awsq: dead letters of %s: %w", t, err))
	}
	out := make([]broker.DeadLetter, 0, len(items))
	for _, it := range items {
		dl, err := in.deadLetter(ctx, it)
		if err != nil {
			return nil, ctxErr(ctx, err)
		}
		out = append(out, dl)
	}
	slices.SortStableFunc(out, func(x, y broker.DeadLetter) int { return x.At.Compare(y.At) })
	return out, nil
}

// deadLetter decodes a dead-letter item; its job is inline or, when large, in S3.
func (in *inbox) deadLetter(ctx context.Context, it item) (broker.DeadLetter, error) {
	dl := broker.DeadLetter{Reason: getS(it, "reason"), At: time.UnixMilli(getN(it, "at")).UTC()}
	body := []byte(getS(it, "job"))
	if ref := getS(it, "s3"); ref != "" {
		b, err := in.a.getObject(ctx, ref)
		if err != nil {
			return dl, err
		}
		body = b
	}
	if err := json.Unmarshal(body, &dl.Job); err != nil {
		return dl, fmt.Errorf("awsq: undecodable dead letter %s: %w", getS(it, attrSK), err)
	}
	return dl, nil
}

func (in *inbox) RemoveDeadLetter(ctx context.Context, t tenant.ID, jobID string) error {
	out, err := in.a.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(in.a.names.deadLetters), Key: key(t.String(), jobID),
		ReturnValues: dtypes.ReturnValueAllOld,
	})
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("awsq: remove dead letter %s: %w", jobID, err))
	}
	if ref := getS(out.Attributes, "s3"); ref != "" {
		return in.a.deleteObject(ctx, ref)
	}
	return nil
}
