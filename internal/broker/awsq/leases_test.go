package awsq_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/awsq"
	"github.com/webordinary/webordinary/internal/broker/awsq/awsqtest"
)

// leaseTable reaches the leases table under an awsq backend, to write and read its items as
// another version of the code would.
type leaseTable struct {
	ddb  *dynamodb.Client
	name string
}

func newLeaseTable(cfg awsq.Config) leaseTable {
	return leaseTable{ddb: awsqtest.ClientsOf(cfg).DynamoDB, name: cfg.Prefix + "_leases"}
}

func n(v int64) dtypes.AttributeValue {
	return &dtypes.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func s(v string) dtypes.AttributeValue { return &dtypes.AttributeValueMemberS{Value: v} }

func (lt leaseTable) put(t *testing.T, ctx context.Context, it map[string]dtypes.AttributeValue) {
	t.Helper()
	_, err := lt.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(lt.name), Item: it})
	must(t, err, "put a lease item")
}

func (lt leaseTable) get(t *testing.T, ctx context.Context, pk string) map[string]dtypes.AttributeValue {
	t.Helper()
	out, err := lt.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(lt.name), ConsistentRead: aws.Bool(true),
		Key: map[string]dtypes.AttributeValue{"pk": s(pk), "sk": s("-")}})
	must(t, err, "get a lease item")
	return out.Item
}

// oldLease is a held lease item as the code before the shared lease rules wrote it.
func oldLease(owner string, token int64, expires time.Time) map[string]dtypes.AttributeValue {
	return map[string]dtypes.AttributeValue{"pk": s(alice.String()), "sk": s("-"), "owner": s(owner),
		"claimedAt": n(time.Now().UnixMilli()), "expiresAt": n(expires.UnixMilli()), "ttlMs": n(60_000),
		"token": n(token), "live": s("1")}
}

// TestLeaseItemsOfEarlierVersions: the leases keep the item layout of the awsq lease code
// before the shared rules (a rolling deploy runs both on one table): a held lease it wrote is
// held, renewed and released; its tombstones and run-out leases are taken over with a larger
// token; and what this code writes is what that code reads.
func TestLeaseItemsOfEarlierVersions(t *testing.T) {
	ctx, cfg := setup(t, awsq.Config{})
	b := awsqtest.Open(t, cfg)
	lt := newLeaseTable(cfg)
	if _, err := b.Leases.Acquire(ctx, alice, "w0", time.Minute); err != nil { // creates "#token"
		t.Fatalf("acquire: %v", err)
	}
	lt.put(t, ctx, map[string]dtypes.AttributeValue{"pk": s("#token"), "sk": s("-"), "n": n(100)})

	lt.put(t, ctx, oldLease("old", 100, time.Now().Add(time.Minute)))
	held, err := b.Leases.Get(ctx, alice)
	must(t, err, "get the old code's lease")
	if held.Owner != "old" || held.Token != 100 {
		t.Fatalf("expected the old code's lease (owner old, token 100), got %+v", held)
	}
	if _, err := b.Leases.Acquire(ctx, alice, "new", time.Minute); !errors.Is(err, broker.ErrLeaseHeld) {
		t.Fatalf("expected the old code's live lease held, got %v", err)
	}
	held, err = b.Leases.Renew(ctx, held)
	must(t, err, "renew the old code's lease")
	must(t, b.Leases.Release(ctx, held), "release the old code's lease")
	tomb := lt.get(t, ctx, alice.String())
	if _, ok := tomb["live"]; ok || tomb["expiresAt"].(*dtypes.AttributeValueMemberN).Value != "0" {
		t.Fatalf("expected a tombstone (expiresAt 0, no live), got %v", tomb)
	}

	lt.put(t, ctx, oldLease("old", 100, time.Now().Add(-time.Minute)))
	l, err := b.Leases.Acquire(ctx, alice, "new", time.Minute)
	must(t, err, "take over the old code's lease that ran out")
	if l.Token <= 100 {
		t.Fatalf("expected a token above the old code's 100, got %d", l.Token)
	}
	want := oldLease("new", int64(l.Token), l.ExpiresAt)
	want["claimedAt"] = n(l.ClaimedAt.UnixMilli())
	got := lt.get(t, ctx, alice.String())
	for k, v := range want {
		if g, ok := got[k]; !ok || attr(g) != attr(v) {
			t.Errorf("expected attribute %s = %s in the layout the old code reads, got %v", k, attr(v), got[k])
		}
	}
}

func attr(v dtypes.AttributeValue) string {
	switch v := v.(type) {
	case *dtypes.AttributeValueMemberS:
		return "S:" + v.Value
	case *dtypes.AttributeValueMemberN:
		return "N:" + v.Value
	}
	return "?"
}

// TestOthersWaitTheClockSkew: once a lease's ExpiresAt passes, its holder can no longer renew
// it, but others still see it held for ClockSkew more (their clocks may be behind the
// holder's) and take it over only after that.
func TestOthersWaitTheClockSkew(t *testing.T) {
	const skew = 3 * time.Second
	ctx, cfg := setup(t, awsq.Config{ClockSkew: skew})
	b := awsqtest.Open(t, cfg)
	l, err := b.Leases.Acquire(ctx, alice, "w1", time.Second)
	must(t, err, "acquire")
	waitUntil(t, l.ExpiresAt)
	if _, err := b.Leases.Renew(ctx, l); !errors.Is(err, broker.ErrLeaseLost) {
		t.Fatalf("expected the holder's renewal past ExpiresAt refused with ErrLeaseLost, got %v", err)
	}
	if time.Now().After(l.ExpiresAt.Add(skew / 2)) {
		t.Skip("the machine was too slow to look inside the skew allowance")
	}
	if got, err := b.Leases.Get(ctx, alice); err != nil || got.Token != l.Token {
		t.Errorf("expected others to see token %d held within the skew allowance, got %+v, %v", l.Token, got, err)
	}
	if list, err := b.Leases.List(ctx); err != nil || len(list) != 1 {
		t.Errorf("expected the lease listed within the skew allowance, got %+v, %v", list, err)
	}
	if _, err := b.Leases.Acquire(ctx, alice, "w2", time.Minute); !errors.Is(err, broker.ErrLeaseHeld) {
		t.Errorf("expected a takeover within the skew allowance refused with ErrLeaseHeld, got %v", err)
	}
	waitUntil(t, l.ExpiresAt.Add(skew))
	next, err := b.Leases.Acquire(ctx, alice, "w2", time.Minute)
	must(t, err, "take over past the skew allowance")
	if next.Token <= l.Token {
		t.Errorf("expected the takeover's token above %d, got %d", l.Token, next.Token)
	}
}

// waitUntil returns once the clock has passed at.
func waitUntil(t *testing.T, at time.Time) {
	t.Helper()
	select {
	case <-time.After(time.Until(at) + time.Millisecond):
	case <-t.Context().Done():
		t.Fatal("the test ended before its wait")
	}
}
