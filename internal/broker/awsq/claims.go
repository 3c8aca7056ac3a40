package awsq

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	qtypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// claims is the standard SQS queue "<prefix>-claims": every request is its own message (no
// de-duplication); a received request is invisible for ClaimAckWait.
type claims struct {
	a *adapter
	r *receiver

	mu      sync.Mutex
	waiting int
	asked   time.Time
}

var _ broker.Claims = (*claims)(nil)

func newClaims(a *adapter) *claims {
	c := &claims{a: a, r: newReceiver(a, a.names.claims, 10, a.cfg.ClaimAckWait, false)}
	a.register(c.r)
	return c
}

// claimBody is a claim request's message.
type claimBody struct {
	Tenant string `json:"t"`
	At     int64  `json:"at"`
}

func (c *claims) Request(ctx context.Context, t tenant.ID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	body, _ := json.Marshal(claimBody{Tenant: t.String(), At: nowMs()})
	url, err := c.a.queueURL(ctx, c.a.names.claims)
	if err == nil {
		_, err = c.a.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(string(body))})
	}
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("awsq: request a claim for %s: %w", t, err))
	}
	return nil
}

// Next waits for a request from the detached poll; an undecodable one is deleted and skipped.
func (c *claims) Next(ctx context.Context) (broker.Claim, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m, err := c.r.next(ctx, -1)
		if err != nil {
			return nil, err
		}
		if !c.r.fresh(ctx, m) {
			continue
		}
		var b claimBody
		t, err := tenant.ID{}, json.Unmarshal([]byte(aws.ToString(m.msg.Body)), &b)
		if err == nil {
			t, err = tenant.Parse(b.Tenant)
		}
		if err != nil {
			c.a.cfg.Logger.Warn("awsq: dropped an undecodable claim request", "err", err)
			_ = c.a.deleteMessage(ctx, c.a.names.claims, aws.ToString(m.msg.ReceiptHandle))
			continue
		}
		return &claim{a: c.a, t: t, at: time.UnixMilli(b.At), handle: aws.ToString(m.msg.ReceiptHandle)}, nil
	}
}

// Waiting is SQS's count of visible requests (approximate on AWS: a hint) plus those this
// process holds, reused for WaitingCache: the worker pool asks every 50 ms.
func (c *claims) Waiting(ctx context.Context) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.asked) < c.a.cfg.WaitingCache {
		return c.waiting, nil
	}
	n, err := c.visible(ctx)
	if err != nil {
		return 0, ctxErr(ctx, fmt.Errorf("awsq: waiting claims: %w", err))
	}
	c.waiting, c.asked = n, time.Now()
	return n, nil
}

func (c *claims) visible(ctx context.Context) (int, error) {
	url, err := c.a.queueURL(ctx, c.a.names.claims)
	if err != nil {
		return 0, err
	}
	out, err := c.a.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []qtypes.QueueAttributeName{qtypes.QueueAttributeNameApproximateNumberOfMessages},
	})
	if err != nil {
		return 0, err
	}
	n, _ := strconv.Atoi(out.Attributes[string(qtypes.QueueAttributeNameApproximateNumberOfMessages)])
	c.r.mu.Lock()
	n += len(c.r.ready)
	c.r.mu.Unlock()
	return n, nil
}

// claim is one received request.
type claim struct {
	a      *adapter
	t      tenant.ID
	at     time.Time
	handle string
}

func (c *claim) Tenant() tenant.ID      { return c.t }
func (c *claim) RequestedAt() time.Time { return c.at }

// Ack deletes the request; SQS accepts a repeated delete.
func (c *claim) Ack(ctx context.Context) error {
	if err := c.a.deleteMessage(ctx, c.a.names.claims, c.handle); err != nil {
		return ctxErr(ctx, fmt.Errorf("awsq: ack the claim for %s: %w", c.t, err))
	}
	return nil
}
