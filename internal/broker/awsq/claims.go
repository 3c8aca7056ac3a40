package awsq

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// claims keeps each tenant's outstanding request as one item of the table "<prefix>_claims"
// (since, when made, a version, and while handed out: until when); the item is deleted when
// the request is acknowledged, so the table holds only outstanding requests and a consistent
// Scan of it is small. Every write is conditioned on the version, so a request and a
// hand-out never overwrite each other.
//
// SQS cannot order by since, so the standard queue "<prefix>-claims" only carries doorbells:
// a message per request that became waiting. A Next caller long-polls it (detached, as every
// receive here), scans the table, and takes the waiting request with the oldest since by a
// conditional write. The doorbell it used stays in flight while the claim is handed out and
// is deleted by Ack; unacknowledged, it reappears after ClaimAckWait, when the hand-out has
// run out too, and whoever receives it hands the request out again. So every outstanding
// request has a doorbell, surplus doorbells (SQS delivers at least once) cost a scan each,
// and an idle worker pool costs one long poll per PollWait and nothing else.
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

// claimRecord is a tenant's outstanding request (times in Unix milliseconds; since 0 is the
// zero time, before any dated request).
type claimRecord struct {
	t     tenant.ID
	since int64
	at    int64
	until int64 // handed out until then; 0 when waiting
	rung  int64 // when a doorbell was last sent for it
	ver   int64
}

func (r claimRecord) waiting(now int64) bool { return r.until <= now }

// before orders waiting requests: oldest since, then made first, then by tenant.
func (r claimRecord) before(o claimRecord) bool {
	if r.since != o.since {
		return r.since < o.since
	}
	if r.at != o.at {
		return r.at < o.at
	}
	return r.t.String() < o.t.String()
}

func claimItem(r claimRecord) item {
	it := key(r.t.String(), noSK)
	it["since"], it["at"], it["until"], it["rung"], it["v"] = num(r.since), num(r.at), num(r.until), num(r.rung), num(r.ver)
	return it
}

func claimFromItem(it item) (claimRecord, error) {
	t, err := tenant.Parse(getS(it, attrPK))
	return claimRecord{t: t, since: getN(it, "since"), at: getN(it, "at"), until: getN(it, "until"), rung: getN(it, "rung"), ver: getN(it, "v")}, err
}

func sinceMs(since time.Time) int64 {
	if since.IsZero() {
		return 0
	}
	return max(since.UnixMilli(), 1)
}

func (c *claims) Request(ctx context.Context, t tenant.ID, since time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.request(ctx, t, sinceMs(since)); err != nil {
		return ctxErr(ctx, fmt.Errorf("awsq: request a claim for %s: %w", t, err))
	}
	return nil
}

// request merges a request into t's record (creating it when there is none) and rings when
// the request became waiting, or when it has waited a hand-out time since its last doorbell
// (a doorbell lost between the write and the send is made good by the next request: the
// router's reconciler asks again every few seconds).
func (c *claims) request(ctx context.Context, t tenant.ID, since int64) error {
	for {
		now := nowMs()
		fresh := claimRecord{t: t, since: since, at: now, rung: now, ver: 1}
		err := c.put(ctx, fresh, "attribute_not_exists(pk)", nil)
		if err == nil {
			return c.ring(ctx)
		}
		if !conditionFailed(err) {
			return err
		}
		it, err := c.a.getItem(ctx, c.a.names.claimsTable, key(t.String(), noSK))
		if err != nil {
			return err
		}
		if it == nil {
			continue // acknowledged meanwhile: a new request
		}
		cur, err := claimFromItem(it)
		if err != nil {
			return err
		}
		next, write, ring := cur.merged(since, now, c.a.cfg.ClaimAckWait.Milliseconds())
		if write {
			err = c.put(ctx, next, "v = :v", item{":v": num(cur.ver)})
			if conditionFailed(err) {
				continue // a hand-out or another request wrote first: merge with that
			}
			if err != nil {
				return err
			}
		}
		if ring {
			return c.ring(ctx)
		}
		return nil
	}
}

// merged is r after a request with since at now: whether it must be written and whether a
// doorbell must be sent.
func (r claimRecord) merged(since, now, ackWait int64) (next claimRecord, write, ring bool) {
	next = r
	next.ver++
	if since < r.since {
		next.since, write = since, true
	}
	if !r.waiting(now) {
		// Handed out and being decided: waiting again, in its place, so the request survives
		// a taker that drops the claim (its Ack will not match the version).
		next.until, write, ring = 0, true, true
	} else if now-r.rung >= ackWait {
		write, ring = true, true
	}
	if ring {
		next.rung = now
	}
	return next, write, ring
}

func (c *claims) put(ctx context.Context, r claimRecord, cond string, values item) error {
	_, err := c.a.ddb.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(c.a.names.claimsTable), Item: claimItem(r),
		ConditionExpression: aws.String(cond), ExpressionAttributeValues: values,
	})
	return err
}

// ring sends a doorbell.
func (c *claims) ring(ctx context.Context) error {
	url, err := c.a.queueURL(ctx, c.a.names.claims)
	if err == nil {
		_, err = c.a.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("claim")})
	}
	return err
}

// Next waits for a doorbell and hands out the oldest waiting request with it.
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
		cl, err := c.answer(ctx, aws.ToString(m.msg.ReceiptHandle))
		if cl != nil || err != nil {
			if err != nil {
				c.a.release(c.a.names.claims, aws.ToString(m.msg.ReceiptHandle))
			}
			return cl, ctxErr(ctx, err)
		}
	}
}

// answer takes the oldest waiting request for the doorbell of handle. With none waiting, the
// doorbell is deleted, or, while a request is handed out, hidden until that hand-out runs out
// (then it answers that request should it come back).
func (c *claims) answer(ctx context.Context, handle string) (broker.Claim, error) {
	for {
		recs, err := c.outstanding(ctx)
		if err != nil {
			return nil, fmt.Errorf("awsq: next claim: %w", err)
		}
		now := nowMs()
		i := slices.IndexFunc(recs, func(r claimRecord) bool { return r.waiting(now) })
		if i < 0 {
			return nil, c.park(ctx, handle, recs, now)
		}
		taken := recs[i]
		taken.until, taken.ver = now+c.a.cfg.ClaimAckWait.Milliseconds(), taken.ver+1
		err = c.put(ctx, taken, "v = :v", item{":v": num(recs[i].ver)})
		if conditionFailed(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("awsq: next claim: %w", err)
		}
		c.counted(recs, now, 1)
		return &claim{a: c.a, rec: taken, handle: handle}, nil
	}
}

// park deletes a doorbell nothing waits for, or hides it until the earliest hand-out ends.
func (c *claims) park(ctx context.Context, handle string, recs []claimRecord, now int64) error {
	if len(recs) == 0 {
		return c.a.deleteMessage(ctx, c.a.names.claims, handle)
	}
	until := slices.MinFunc(recs, func(a, b claimRecord) int { return int(a.until - b.until) }).until
	err := c.a.setVisibility(ctx, c.a.names.claims, handle, time.Duration(until-now)*time.Millisecond)
	if staleHandle(err) {
		return nil
	}
	return err
}

// outstanding reads every outstanding request, in hand-out order.
func (c *claims) outstanding(ctx context.Context) ([]claimRecord, error) {
	items, err := c.a.scan(ctx, c.a.names.claimsTable, func(item) bool { return true })
	if err != nil {
		return nil, err
	}
	recs := make([]claimRecord, 0, len(items))
	for _, it := range items {
		if r, err := claimFromItem(it); err == nil {
			recs = append(recs, r)
		}
	}
	slices.SortFunc(recs, func(a, b claimRecord) int {
		if a.before(b) {
			return -1
		}
		return 1
	})
	return recs, nil
}

// counted refreshes the cached Waiting answer from recs, a scan just made, less the ones
// this client took since: a pool asks Waiting right after taking a claim (is anyone else
// waiting?), and an answer from before the take would count it.
func (c *claims) counted(recs []claimRecord, now int64, took int) {
	n := 0
	for _, r := range recs {
		if r.waiting(now) {
			n++
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waiting, c.asked = max(n-took, 0), time.Now()
}

// Waiting counts the waiting requests with a consistent scan, reused for WaitingCache: the
// worker pool asks every 50 ms while an owner is idle. Nobody asks while no tenant is owned.
func (c *claims) Waiting(ctx context.Context) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.asked) < c.a.cfg.WaitingCache {
		return c.waiting, nil
	}
	recs, err := c.outstanding(ctx)
	if err != nil {
		return 0, ctxErr(ctx, fmt.Errorf("awsq: waiting claims: %w", err))
	}
	now, n := nowMs(), 0
	for _, r := range recs {
		if r.waiting(now) {
			n++
		}
	}
	c.waiting, c.asked = n, time.Now()
	return n, nil
}

// claim is one handed-out request and the doorbell that brought it.
type claim struct {
	a      *adapter
	rec    claimRecord
	handle string
}

func (c *claim) Tenant() tenant.ID { return c.rec.t }

func (c *claim) RequestedAt() time.Time { return time.UnixMilli(c.rec.at) }

// Ack deletes the request unless it was requested again after the hand-out (then the version
// differs and it stays waiting, with its own doorbell), then deletes the doorbell.
func (c *claim) Ack(ctx context.Context) error {
	_, err := c.a.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(c.a.names.claimsTable), Key: key(c.rec.t.String(), noSK),
		ConditionExpression: aws.String("v = :v"), ExpressionAttributeValues: item{":v": num(c.rec.ver)},
	})
	if err == nil || conditionFailed(err) {
		err = c.a.deleteMessage(ctx, c.a.names.claims, c.handle)
	}
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("awsq: ack the claim for %s: %w", c.rec.t, err))
	}
	return nil
}
