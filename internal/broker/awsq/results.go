package awsq

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/webordinary/webordinary/internal/broker"
)

// results is the FIFO queue "<prefix>-results.fifo": one message group per tenant (its replies
// stay in order; a result that keeps failing holds back only its tenant), de-duplicated by job
// id for SQS's five minutes. Large results travel through S3 like large jobs.
type results struct {
	a *adapter
	r *receiver
}

var _ broker.Results = (*results)(nil)

func newResults(a *adapter) *results {
	rs := &results{a: a, r: newReceiver(a, a.names.results, 10, a.cfg.ResultAckWait, false)}
	a.register(rs.r)
	return rs
}

func (rs *results) Publish(ctx context.Context, r broker.Result) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	body, err := rs.a.wrap(ctx, r.JobID, "results/"+r.JobID+".json", r)
	if err == nil {
		err = rs.send(ctx, r, body)
	}
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("awsq: publish the result of %s: %w", r.JobID, err))
	}
	return nil
}

func (rs *results) send(ctx context.Context, r broker.Result, body string) error {
	url, err := rs.a.queueURL(ctx, rs.a.names.results)
	if err != nil {
		return err
	}
	_, err = rs.a.sqs.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:               aws.String(url),
		MessageBody:            aws.String(body),
		MessageGroupId:         aws.String(groupOf(r)),
		MessageDeduplicationId: aws.String("result-" + r.JobID),
	})
	return err
}

// groupOf is a result's message group: its tenant, or one shared group when it names none.
func groupOf(r broker.Result) string {
	if r.Tenant.Project == "" {
		return "-"
	}
	return r.Tenant.String()
}

func (rs *results) Next(ctx context.Context) (broker.ResultDelivery, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m, err := rs.r.next(ctx, -1)
		if err != nil {
			return nil, err
		}
		if !rs.r.fresh(ctx, m) {
			continue
		}
		d := &resultDelivery{rs: rs, handle: aws.ToString(m.msg.ReceiptHandle), attempt: attempt(m.msg)}
		env, err := rs.a.unwrap(ctx, aws.ToString(m.msg.Body), &d.r)
		if errors.Is(err, errPayloadGone) {
			_ = rs.a.deleteMessage(ctx, rs.a.names.results, d.handle)
			continue
		}
		if err != nil {
			rs.a.release(rs.a.names.results, d.handle)
			return nil, ctxErr(ctx, err)
		}
		d.payload = env.S3
		return d, nil
	}
}

// resultDelivery is one received result.
type resultDelivery struct {
	rs      *results
	r       broker.Result
	handle  string
	payload string
	attempt int
}

func (d *resultDelivery) Result() broker.Result { return d.r }
func (d *resultDelivery) Attempt() int          { return d.attempt }

// Ack deletes the message (SQS accepts a repeated delete) and a large result's payload.
func (d *resultDelivery) Ack(ctx context.Context) error {
	err := d.rs.a.deleteMessage(ctx, d.rs.a.names.results, d.handle)
	if err == nil && d.payload != "" {
		err = d.rs.a.deleteObject(ctx, d.payload)
	}
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("awsq: ack the result of %s: %w", d.r.JobID, err))
	}
	return nil
}
