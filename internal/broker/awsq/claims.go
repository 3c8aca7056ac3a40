package awsq

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// claims is the broker's claim rules (broker.SharedClaims, on bells) over claimStore. It
// offers only broker.Claims: a bell goes to whichever idle Next receives it, so a warm
// preference could not be honoured.
type claims struct{ s *broker.SharedClaims }

var _ broker.Claims = claims{}

func newClaims(a *adapter) claims {
	st := &claimStore{a: a, r: newReceiver(a, a.names.claims, 10, a.cfg.ClaimAckWait, false)}
	a.register(st.r)
	return claims{broker.NewBelledClaims(st, broker.ClaimsConfig{AckWait: a.cfg.ClaimAckWait, WaitingCache: a.cfg.WaitingCache})}
}

func (c claims) Request(ctx context.Context, t tenant.ID, since time.Time) error {
	return c.s.Request(ctx, t, since)
}
func (c claims) Next(ctx context.Context) (broker.Claim, error) { return c.s.Next(ctx) }
func (c claims) Waiting(ctx context.Context) (int, error)       { return c.s.Waiting(ctx) }

// Records is the store under the claims, for its conformance tests.
func (c claims) Records() broker.ClaimRecords { return c.s.Records() }

// claimStore keeps each tenant's outstanding request as one item of the table
// "<prefix>_claims" (the record as "rec", its version as "v"), deleted when the request is
// acknowledged, so the table holds only outstanding requests and a consistent Scan of it is
// small. Writes are PutItem and DeleteItem conditioned on the version. Bells are messages of
// the standard queue "<prefix>-claims", received (detached, as every receive here) with
// ClaimAckWait of visibility: an unspent bell rings again when the hand-out it brought has
// run out. An idle worker pool costs one long poll per PollWait and nothing else.
type claimStore struct {
	a *adapter
	r *receiver
}

var _ broker.ClaimBells = (*claimStore)(nil)

func (s *claimStore) Get(ctx context.Context, t tenant.ID) (broker.ClaimEntry, error) {
	it, err := s.a.getItem(ctx, s.a.names.claimsTable, key(t.String(), noSK))
	if err != nil || it == nil {
		return broker.ClaimEntry{Tenant: t}, err
	}
	return claimEntry(t, it), nil
}

func claimEntry(t tenant.ID, it item) broker.ClaimEntry {
	return broker.ClaimEntry{Tenant: t, Value: []byte(getS(it, "rec")), Version: uint64(getN(it, "v"))}
}

// Put writes at a version new for the key even across a delete (the clock's nanoseconds, or
// one past the last), so a holder of a removed record's version never matches a new one.
func (s *claimStore) Put(ctx context.Context, t tenant.ID, value []byte, version uint64) (uint64, error) {
	next := max(version+1, uint64(time.Now().UnixNano()))
	it := key(t.String(), noSK)
	it["rec"], it["v"] = str(string(value)), num(int64(next))
	in := &dynamodb.PutItemInput{TableName: aws.String(s.a.names.claimsTable), Item: it,
		ConditionExpression: aws.String("attribute_not_exists(pk)")}
	if version != 0 {
		in.ConditionExpression = aws.String("v = :v")
		in.ExpressionAttributeValues = item{":v": num(int64(version))}
	}
	_, err := s.a.ddb.PutItem(ctx, in)
	if conditionFailed(err) {
		return 0, broker.ErrConflict
	}
	if err != nil {
		return 0, err
	}
	return next, nil
}

func (s *claimStore) Delete(ctx context.Context, t tenant.ID, version uint64) error {
	_, err := s.a.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.a.names.claimsTable), Key: key(t.String(), noSK),
		ConditionExpression: aws.String("v = :v"), ExpressionAttributeValues: item{":v": num(int64(version))},
	})
	if conditionFailed(err) {
		return broker.ErrConflict
	}
	return err
}

// List scans the table consistently.
func (s *claimStore) List(ctx context.Context) ([]broker.ClaimEntry, error) {
	items, err := s.a.scan(ctx, s.a.names.claimsTable, func(item) bool { return true })
	if err != nil {
		return nil, err
	}
	entries := make([]broker.ClaimEntry, 0, len(items))
	for _, it := range items {
		if t, err := tenant.Parse(getS(it, attrPK)); err == nil {
			entries = append(entries, claimEntry(t, it))
		}
	}
	return entries, nil
}

// Ring sends a bell.
func (s *claimStore) Ring(ctx context.Context) error {
	url, err := s.a.queueURL(ctx, s.a.names.claims)
	if err == nil {
		_, err = s.a.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("claim")})
	}
	return err
}

// Wait long-polls for a bell still ours for its whole visibility.
func (s *claimStore) Wait(ctx context.Context) (broker.Bell, error) {
	for {
		m, err := s.r.next(ctx, -1)
		if err != nil {
			return nil, err
		}
		if s.r.fresh(ctx, m) {
			return &bell{a: s.a, handle: aws.ToString(m.msg.ReceiptHandle)}, nil
		}
	}
}

// bell is a received bell message.
type bell struct {
	a      *adapter
	handle string
}

func (b *bell) Done(ctx context.Context) error {
	return b.a.deleteMessage(ctx, b.a.names.claims, b.handle)
}

func (b *bell) Snooze(ctx context.Context, d time.Duration) error {
	err := b.a.setVisibility(ctx, b.a.names.claims, b.handle, d)
	if staleHandle(err) {
		return nil
	}
	return err
}

func (b *bell) Drop() { b.a.release(b.a.names.claims, b.handle) }
