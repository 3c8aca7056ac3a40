package awsq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// queue is an owner's open view of a tenant's FIFO queue: one detached long poll at a time,
// one message per receive, its visibility the AckWait.
type queue struct {
	a       *adapter
	t       tenant.ID
	id      string // this opener's id in the ledger
	name    string // the SQS queue
	ackWait time.Duration
	r       *receiver

	mu      sync.Mutex
	current *delivery // the delivery handed out and not settled
}

var _ broker.Queue = (*queue)(nil)

func newQueue(a *adapter, t tenant.ID, ackWait time.Duration) *queue {
	name := a.names.tenantQueue(t)
	q := &queue{a: a, t: t, id: randomID(), name: name, ackWait: ackWait,
		r: newReceiver(a, name, 1, ackWait, true)}
	q.r.empty = q.prunePhantoms
	return q
}

// prunePhantoms runs after a long poll that began at start found the queue empty. If the
// ledger still counts jobs, nothing was counted since start, no publish is half done and SQS
// holds no message at all, the counted ids are phantoms (a job id republished after its ack
// inside SQS's de-duplication window is dropped by SQS but counted): they would make claims
// loop, so they are removed. sentAt is set, so Tenants' sweep looks into the queue once more
// after SweepAfter, should SQS's approximate count have been wrong.
func (q *queue) prunePhantoms(start time.Time) {
	if q.busy() {
		return
	}
	ctx, cancel := context.WithTimeout(q.a.bg, 10*time.Second)
	defer cancel()
	it, err := q.a.ledger(ctx, q.t)
	ids := getSS(it, "pending")
	if err != nil || len(ids) == 0 || getN(it, "countedAt") >= start.UnixMilli() || getN(it, "sentAt") > getN(it, "countedAt") {
		return
	}
	if n, err := q.a.queueDepth(ctx, q.name); err != nil || n > 0 {
		return
	}
	_, err = q.a.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(q.a.names.inbox), Key: key(q.t.String(), noSK),
		UpdateExpression:          aws.String("DELETE pending :ids SET sentAt = :now"),
		ConditionExpression:       aws.String("countedAt = :c AND opener = :me"),
		ExpressionAttributeValues: item{":ids": set(ids...), ":now": num(nowMs()), ":c": it["countedAt"], ":me": str(q.id)},
	})
	if err == nil {
		q.a.cfg.Logger.Warn("awsq: removed counted jobs that SQS does not hold", "tenant", q.t.String(), "jobs", ids)
	}
}

// busy reports whether a delivery of this queue is unsettled or a message is kept for it.
func (q *queue) busy() bool {
	q.mu.Lock()
	d := q.current
	q.mu.Unlock()
	if d != nil && !d.isSettled() {
		return true
	}
	q.r.mu.Lock()
	defer q.r.mu.Unlock()
	return len(q.r.ready) > 0
}

// open records this opener in the ledger and makes the delivery a previous holder left
// unsettled visible again at once, so it comes first.
func (q *queue) open(ctx context.Context) error {
	out, err := q.a.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(q.a.names.inbox),
		Key:                       key(q.t.String(), noSK),
		UpdateExpression:          aws.String("SET opener = :me REMOVE hnd"),
		ExpressionAttributeValues: item{":me": str(q.id)},
		ReturnValues:              dtypes.ReturnValueAllOld,
	})
	if err != nil {
		return err
	}
	if old := getS(out.Attributes, "hnd"); old != "" {
		if err := q.a.setVisibility(ctx, q.name, old, 0); err != nil && !staleHandle(err) && !noSuchQueue(err) {
			return err
		}
	}
	if !q.a.register(q.r) {
		return errClosed
	}
	return nil
}

func (q *queue) Next(ctx context.Context, wait time.Duration) (broker.Delivery, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		m, err := q.r.next(ctx, max(time.Until(deadline), 0))
		if err != nil {
			return nil, err
		}
		d, err := q.handOff(ctx, m)
		switch {
		case err != nil:
			return nil, ctxErr(ctx, err)
		case d != nil && !q.a.cfg.NoTransactions:
			return txDelivery{d}, nil
		case d != nil:
			return d, nil
		}
	}
}

// handOff turns a received message into a delivery: it records the receipt handle in the
// ledger (only while this opener is the tenant's latest) and counts the job again if a crash
// left it uncounted. A nil delivery and error means the message was dropped; receive again.
func (q *queue) handOff(ctx context.Context, m received) (*delivery, error) {
	handle := aws.ToString(m.msg.ReceiptHandle)
	if !q.r.fresh(ctx, m) {
		return nil, nil
	}
	d := &delivery{q: q, handle: handle, attempt: attempt(m.msg)}
	env, err := q.a.unwrap(ctx, aws.ToString(m.msg.Body), &d.job)
	if errors.Is(err, errPayloadGone) { // acknowledged before; only its message was left
		return nil, q.a.deleteMessage(ctx, q.name, handle)
	}
	if err != nil {
		return nil, err
	}
	d.payload = env.S3
	behind, err := q.record(ctx, env.ID, handle)
	if err != nil {
		q.a.release(q.name, handle)
		return nil, err
	}
	d.behind = behind
	q.mu.Lock()
	q.current = d
	q.mu.Unlock()
	return d, nil
}

// record stores handle as the tenant's delivery and counts id; it returns how many messages
// are pending behind this one. ErrLeaseLost when another owner opened the tenant since.
func (q *queue) record(ctx context.Context, id, handle string) (int, error) {
	out, err := q.a.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(q.a.names.inbox),
		Key:                       key(q.t.String(), noSK),
		UpdateExpression:          aws.String("SET hnd = :h ADD pending :id"),
		ConditionExpression:       aws.String("opener = :me"),
		ExpressionAttributeValues: item{":h": str(handle), ":id": set(id), ":me": str(q.id)},
		ReturnValues:              dtypes.ReturnValueAllNew,
	})
	if conditionFailed(err) {
		return 0, fmt.Errorf("awsq: %s was opened by another owner: %w", q.t, broker.ErrLeaseLost)
	}
	if err != nil {
		return 0, err
	}
	return len(getSS(out.Attributes, "pending")) - 1, nil
}

// Close stops the poll and gives back what it holds and an unsettled delivery. Idempotent.
func (q *queue) Close(ctx context.Context) error {
	q.r.close()
	q.a.unregister(q.r)
	q.mu.Lock()
	d := q.current
	q.current = nil
	q.mu.Unlock()
	if d != nil && !d.isSettled() {
		if err := q.a.setVisibility(ctx, q.name, d.handle, 0); err != nil && !staleHandle(err) && !noSuchQueue(err) {
			return ctxErr(ctx, fmt.Errorf("awsq: close %s: %w", q.t, err))
		}
	}
	return nil
}

// delivery is one handed-out message of a tenant queue.
type delivery struct {
	q       *queue
	job     broker.Job
	handle  string
	payload string // S3 key of a large job, deleted with the message
	attempt int
	behind  int

	mu      sync.Mutex
	settled bool
	fence   *fence // txDelivery.FencedBy's: the lease its ledger updates are conditioned on
}

var _ broker.Delivery = (*delivery)(nil)

func (d *delivery) Job() broker.Job { return d.job }
func (d *delivery) Attempt() int    { return d.attempt }
func (d *delivery) Behind() int     { return d.behind }

func (d *delivery) isSettled() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.settled
}

func (d *delivery) markSettled() {
	d.mu.Lock()
	d.settled = true
	d.mu.Unlock()
}

// Extend resets the visibility to AckWait. A zombie's extend of a message received again by
// another owner fails on SQS (stale handle) and reports ErrLeaseLost.
func (d *delivery) Extend(ctx context.Context) error {
	err := d.q.a.setVisibility(ctx, d.q.name, d.handle, d.q.ackWait)
	if err != nil && staleHandle(err) {
		return fmt.Errorf("awsq: extend %s: %w", d.job.ID, broker.ErrLeaseLost)
	}
	return ctxErr(ctx, err)
}

// Ack uncounts the job (only while its handle is still the tenant's delivery: a stale owner's
// ack is refused with ErrLeaseLost, which SQS alone would accept silently), then deletes the
// message and its S3 payload. Idempotent.
func (d *delivery) Ack(ctx context.Context) error {
	if d.isSettled() {
		return nil
	}
	if err := d.uncount(ctx); err != nil {
		return ctxErr(ctx, err)
	}
	if err := d.q.a.fault(FaultAckUncounted); err != nil {
		return err
	}
	if err := d.remove(ctx); err != nil {
		return ctxErr(ctx, err)
	}
	d.markSettled()
	return nil
}

// uncount removes the job from the pending set and clears the handle, fenced on the handle.
func (d *delivery) uncount(ctx context.Context) error {
	err := d.fenced(ctx, "DELETE pending :id REMOVE hnd", item{":id": set(d.job.ID)})
	if !errors.Is(err, broker.ErrLeaseLost) {
		return err
	}
	it, rerr := d.q.a.ledger(ctx, d.q.t)
	if rerr == nil && !contains(getSS(it, "pending"), d.job.ID) {
		return nil // settled already (by this owner, before a crash of the settle)
	}
	return err
}

// fenced applies expr to the ledger only while d's handle is the recorded one and, when d is
// fenced, its lease is the holder's (one transaction).
func (d *delivery) fenced(ctx context.Context, expr string, values item) error {
	values[":h"] = str(d.handle)
	table, k, cond := aws.String(d.q.a.names.inbox), key(d.q.t.String(), noSK), aws.String("hnd = :h")
	var err error
	if d.fence != nil {
		err = d.q.a.writeFenced(ctx, *d.fence, dtypes.TransactWriteItem{Update: &dtypes.Update{TableName: table, Key: k,
			UpdateExpression: aws.String(expr), ConditionExpression: cond, ExpressionAttributeValues: values}})
	} else {
		_, err = d.q.a.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: table, Key: k,
			UpdateExpression: aws.String(expr), ConditionExpression: cond, ExpressionAttributeValues: values})
	}
	if conditionFailed(err) {
		return fmt.Errorf("awsq: %s is no longer this owner's delivery: %w", d.job.ID, broker.ErrLeaseLost)
	}
	return err
}

// remove deletes the message and its payload.
func (d *delivery) remove(ctx context.Context) error {
	if err := d.q.a.deleteMessage(ctx, d.q.name, d.handle); err != nil {
		return fmt.Errorf("awsq: delete %s: %w", d.job.ID, err)
	}
	if d.payload != "" {
		return d.q.a.deleteObject(ctx, d.payload)
	}
	return nil
}

// Retry keeps the message in flight (so nothing behind it overtakes) and makes it visible
// again after delay, rounded up to whole seconds.
func (d *delivery) Retry(ctx context.Context, delay time.Duration) error {
	if d.isSettled() {
		return nil
	}
	if err := d.fenced(ctx, "SET retriedAt = :now", item{":now": num(nowMs())}); err != nil {
		return ctxErr(ctx, err)
	}
	if err := d.q.a.setVisibility(ctx, d.q.name, d.handle, delay); err != nil {
		return ctxErr(ctx, fmt.Errorf("awsq: retry %s: %w", d.job.ID, err))
	}
	d.markSettled()
	return nil
}

// DeadLetter uncounts the job (fenced like Ack), stores it with reason in the dead-letter
// table, then deletes the message (its large payload stays, referenced by the dead letter).
func (d *delivery) DeadLetter(ctx context.Context, reason string) error {
	if d.isSettled() {
		return nil
	}
	if err := d.uncount(ctx); err != nil {
		return ctxErr(ctx, err)
	}
	if err := d.storeDeadLetter(ctx, reason); err != nil {
		return ctxErr(ctx, err)
	}
	if err := d.q.a.deleteMessage(ctx, d.q.name, d.handle); err != nil {
		return ctxErr(ctx, fmt.Errorf("awsq: delete %s: %w", d.job.ID, err))
	}
	d.markSettled()
	return nil
}

func (d *delivery) storeDeadLetter(ctx context.Context, reason string) error {
	it := key(d.q.t.String(), d.job.ID)
	it["reason"], it["at"] = str(reason), num(nowMs())
	if d.payload != "" {
		it["s3"] = str(d.payload)
	} else {
		body, err := jsonString(d.job)
		if err != nil {
			return err
		}
		it["job"] = str(body)
	}
	_, err := d.q.a.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(d.q.a.names.deadLetters), Item: it})
	if err != nil {
		return fmt.Errorf("awsq: dead-letter %s: %w", d.job.ID, err)
	}
	return nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
