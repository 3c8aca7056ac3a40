package awsq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// leases live in the leases table, one item per tenant (pk = "project/user"):
//
//	owner, claimedAt, expiresAt (ms), ttl (ms), token, live ("1" while held: the sparse
//	expiry index)
//
// plus the item "#token" whose counter n issues fencing tokens (ADD, atomic). A released lease
// keeps its item with expiresAt 0 and its token, and an acquisition requires the stored token
// to be lower than its own, so tokens never go backwards. Expiry is judged by client clocks
// (DynamoDB conditions cannot read the server's): the holder stops at expiresAt, others may take
// over ClockSkew later.
type leases struct{ a *adapter }

var _ broker.Leases = (*leases)(nil)

const tokenKey = "#token"

func (l *leases) Acquire(ctx context.Context, t tenant.ID, owner string, ttl time.Duration) (broker.Lease, error) {
	if err := ctx.Err(); err != nil {
		return broker.Lease{}, err
	}
	for try := 0; ; try++ {
		lease, err := l.tryAcquire(ctx, t, owner, ttl)
		if err == errStaleToken && try < 3 {
			continue
		}
		if err == errStaleToken {
			err = broker.ErrLeaseHeld
		}
		return lease, ctxErr(ctx, err)
	}
}

// errStaleToken: the lease was free but a later token had been stored: take a new one.
var errStaleToken = errors.New("awsq: stale fencing token")

func (l *leases) tryAcquire(ctx context.Context, t tenant.ID, owner string, ttl time.Duration) (broker.Lease, error) {
	tok, err := l.nextToken(ctx)
	if err != nil {
		return broker.Lease{}, fmt.Errorf("awsq: acquire %s: %w", t, err)
	}
	now := time.Now()
	lease := broker.Lease{Tenant: t, Owner: owner, Token: tok, ClaimedAt: now, ExpiresAt: now.Add(ttl), TTL: ttl, Version: tok}
	_, err = l.a.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(l.a.names.leases),
		Key:                      key(t.String(), noSK),
		UpdateExpression:         aws.String("SET #o = :o, claimedAt = :now, expiresAt = :exp, ttlMs = :ttl, #tok = :tok, live = :live"),
		ConditionExpression:      aws.String("attribute_not_exists(pk) OR (expiresAt < :free AND #tok < :tok)"),
		ExpressionAttributeNames: placeholders("#o #tok"),
		ExpressionAttributeValues: item{
			":o": str(owner), ":now": num(now.UnixMilli()), ":exp": num(lease.ExpiresAt.UnixMilli()),
			":ttl": num(ttl.Milliseconds()), ":tok": num(int64(tok)), ":live": str("1"),
			":free": num(now.Add(-l.a.cfg.ClockSkew).UnixMilli()),
		},
	})
	if conditionFailed(err) {
		return broker.Lease{}, l.whyHeld(ctx, t, tok)
	}
	if err != nil {
		return broker.Lease{}, fmt.Errorf("awsq: acquire %s: %w", t, err)
	}
	return lease, nil
}

// whyHeld tells a live lease (ErrLeaseHeld) from a free one that stored a later token.
func (l *leases) whyHeld(ctx context.Context, t tenant.ID, tok uint64) error {
	it, err := l.a.getItem(ctx, l.a.names.leases, key(t.String(), noSK))
	if err != nil {
		return fmt.Errorf("awsq: acquire %s: %w", t, err)
	}
	if it != nil && !l.live(it) && uint64(getN(it, "token")) >= tok {
		return errStaleToken
	}
	return broker.ErrLeaseHeld
}

// nextToken issues a fencing token: strictly increasing across every tenant.
func (l *leases) nextToken(ctx context.Context) (uint64, error) {
	out, err := l.a.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(l.a.names.leases),
		Key:                       key(tokenKey, noSK),
		UpdateExpression:          aws.String("ADD n :one"),
		ExpressionAttributeValues: item{":one": num(1)},
		ReturnValues:              dtypes.ReturnValueUpdatedNew,
	})
	if err != nil {
		return 0, err
	}
	return uint64(getN(out.Attributes, "n")), nil
}

// Renew moves expiresAt on, only while the lease is still this acquisition and unexpired.
func (l *leases) Renew(ctx context.Context, lease broker.Lease) (broker.Lease, error) {
	if err := ctx.Err(); err != nil {
		return broker.Lease{}, err
	}
	now := time.Now()
	if !now.Before(lease.ExpiresAt) {
		return broker.Lease{}, broker.ErrLeaseLost
	}
	exp := now.Add(lease.TTL)
	err := l.fenced(ctx, lease, "SET expiresAt = :exp", item{":exp": num(exp.UnixMilli())})
	if err != nil {
		return broker.Lease{}, ctxErr(ctx, err)
	}
	lease.ExpiresAt = exp
	return lease, nil
}

// Release ends the lease but keeps its item (and token); ErrLeaseLost when it is not current.
func (l *leases) Release(ctx context.Context, lease broker.Lease) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return ctxErr(ctx, l.fenced(ctx, lease, "SET expiresAt = :zero REMOVE #o, live", item{":zero": num(0)}))
}

// fenced applies expr while lease is the tenant's current, unexpired acquisition.
func (l *leases) fenced(ctx context.Context, lease broker.Lease, expr string, values item) error {
	values[":tok"], values[":now"] = num(int64(lease.Token)), num(nowMs())
	_, err := l.a.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(l.a.names.leases),
		Key:                       key(lease.Tenant.String(), noSK),
		UpdateExpression:          aws.String(expr),
		ConditionExpression:       aws.String("#tok = :tok AND expiresAt > :now"),
		ExpressionAttributeNames:  placeholders(expr + " #tok"),
		ExpressionAttributeValues: values,
	})
	if conditionFailed(err) {
		return broker.ErrLeaseLost
	}
	if err != nil {
		return fmt.Errorf("awsq: lease of %s: %w", lease.Tenant, err)
	}
	return nil
}

// placeholders returns the attribute-name placeholders expr uses (DynamoDB refuses unused ones;
// "owner" and "token" are reserved words).
func placeholders(expr string) map[string]string {
	m := map[string]string{}
	for p, name := range map[string]string{"#o": "owner", "#tok": "token"} {
		if strings.Contains(expr, p) {
			m[p] = name
		}
	}
	return m
}

func (l *leases) Get(ctx context.Context, t tenant.ID) (broker.Lease, error) {
	it, err := l.a.getItem(ctx, l.a.names.leases, key(t.String(), noSK))
	if err != nil {
		return broker.Lease{}, ctxErr(ctx, fmt.Errorf("awsq: get the lease of %s: %w", t, err))
	}
	if it == nil || !l.live(it) {
		return broker.Lease{}, broker.ErrNotFound
	}
	return leaseOf(t, it), nil
}

func (l *leases) List(ctx context.Context) ([]broker.Lease, error) {
	items, err := l.a.scan(ctx, l.a.names.leases, l.live)
	if err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("awsq: list leases: %w", err))
	}
	out := make([]broker.Lease, 0, len(items))
	for _, it := range items {
		if t, err := tenant.Parse(getS(it, attrPK)); err == nil {
			out = append(out, leaseOf(t, it))
		}
	}
	return out, nil
}

// live reports whether an item is a held lease others must still respect.
func (l *leases) live(it item) bool {
	return getS(it, "live") != "" && time.Now().Add(-l.a.cfg.ClockSkew).UnixMilli() < getN(it, "expiresAt")
}

func leaseOf(t tenant.ID, it item) broker.Lease {
	tok := uint64(getN(it, "token"))
	return broker.Lease{
		Tenant: t, Owner: getS(it, "owner"), Token: tok, Version: tok,
		ClaimedAt: time.UnixMilli(getN(it, "claimedAt")),
		ExpiresAt: time.UnixMilli(getN(it, "expiresAt")),
		TTL:       time.Duration(getN(it, "ttlMs")) * time.Millisecond,
	}
}

// Expired polls the sparse expiry index every ExpiryPoll for held leases whose expiry (plus
// the clock-skew allowance) passed since the last look. Best effort: up to ExpiryPoll late.
func (l *leases) Expired(ctx context.Context) (<-chan tenant.ID, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make(chan tenant.ID, 64)
	go l.watchExpiry(ctx, out)
	return out, nil
}

func (l *leases) watchExpiry(ctx context.Context, out chan<- tenant.ID) {
	defer close(out)
	tick := time.NewTicker(l.a.cfg.ExpiryPoll)
	defer tick.Stop()
	last := time.Now().Add(-l.a.cfg.ClockSkew)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		upTo := time.Now().Add(-l.a.cfg.ClockSkew)
		ts, err := l.expiredBetween(ctx, last, upTo)
		if err != nil {
			continue
		}
		last = upTo
		for _, t := range ts {
			select {
			case out <- t:
			case <-ctx.Done():
				return
			}
		}
	}
}

// expiredBetween lists the held leases with expiresAt in (from, to].
func (l *leases) expiredBetween(ctx context.Context, from, to time.Time) ([]tenant.ID, error) {
	var ts []tenant.ID
	p := dynamodb.NewQueryPaginator(l.a.ddb, &dynamodb.QueryInput{
		TableName:                 aws.String(l.a.names.leases),
		IndexName:                 aws.String(expiryIndex),
		KeyConditionExpression:    aws.String("live = :live AND expiresAt BETWEEN :from AND :to"),
		ExpressionAttributeValues: item{":live": str("1"), ":from": num(from.UnixMilli() + 1), ":to": num(to.UnixMilli())},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			if t, err := tenant.Parse(getS(it, attrPK)); err == nil {
				ts = append(ts, t)
			}
		}
	}
	return ts, nil
}
