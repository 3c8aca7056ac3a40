package awsq

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// leaseStore keeps the leases in the leases table, one item per tenant (pk = "project/user"),
// under the lease rules of broker.NewLeases:
//
//	owner, claimedAt, expiresAt (ms), ttlMs, token, live ("1" while held: the sparse expiry
//	index)
//
// plus the item "#token" whose counter n issues fencing tokens (ADD, atomic). An item's version
// is its token, kept across renewals. A release writes a tombstone on the version (expiresAt 0,
// no owner, token kept), and an acquisition requires the stored token to be lower than its own,
// so tokens never go backwards, also across release and re-acquisition. Expiry is judged by
// client clocks (DynamoDB conditions cannot read the server's): the holder stops at expiresAt,
// others may take over ClockSkew later, so a replacement of a lease that ran out is conditioned
// on expiresAt as well as on the token. fence.go's transactions check the same attributes.
type leaseStore struct{ a *adapter }

var _ broker.SkewedLeaseStore = (*leaseStore)(nil)

func newLeases(a *adapter) broker.Leases { return broker.NewLeases(&leaseStore{a: a}, 0) }

const tokenKey = "#token"

func (s *leaseStore) ClockSkew() time.Duration { return s.a.cfg.ClockSkew }

// ReadLease returns t's item as a lease, a tombstone too (it has run out: expiresAt 0).
func (s *leaseStore) ReadLease(ctx context.Context, t tenant.ID) (broker.Lease, error) {
	it, err := s.a.getItem(ctx, s.a.names.leases, key(t.String(), noSK))
	if err != nil {
		return broker.Lease{}, ctxErr(ctx, fmt.Errorf("awsq: get the lease of %s: %w", t, err))
	}
	if it == nil {
		return broker.Lease{}, broker.ErrNotFound
	}
	return leaseOf(t, it), nil
}

// CreateLease writes l with a new token over no item, a tombstone, or a lease that ran out
// ClockSkew ago (a store that drops leases as they run out would hold none), provided the
// stored token is lower; ErrExists otherwise, and the rules read the item to tell why.
func (s *leaseStore) CreateLease(ctx context.Context, l broker.Lease) (uint64, error) {
	v, err := s.acquire(ctx, l, "attribute_not_exists(pk) OR (expiresAt < :free AND #tok < :tok)", item{})
	if errors.Is(err, broker.ErrConflict) {
		return 0, broker.ErrExists
	}
	return v, err
}

// ReplaceLease renews l (Token set) while its item carries l.Token and has not run out by this
// clock, or takes over (Token 0, a new token) an item still at version that ran out ClockSkew
// ago; ErrConflict otherwise.
func (s *leaseStore) ReplaceLease(ctx context.Context, l broker.Lease, version uint64) (uint64, error) {
	if l.Token == 0 {
		return s.acquire(ctx, l, "#tok = :ver AND expiresAt < :free", item{":ver": num(int64(version))})
	}
	err := s.write(ctx, l, "#tok = :tok AND expiresAt > :now", item{":now": num(nowMs())})
	return l.Token, err
}

// acquire writes l under a new token if cond holds; :free and :tok are set for it.
func (s *leaseStore) acquire(ctx context.Context, l broker.Lease, cond string, values item) (uint64, error) {
	tok, err := s.nextToken(ctx)
	if err != nil {
		return 0, ctxErr(ctx, fmt.Errorf("awsq: acquire %s: %w", l.Tenant, err))
	}
	l.Token = tok
	values[":free"] = num(time.Now().Add(-s.a.cfg.ClockSkew).UnixMilli())
	return tok, s.write(ctx, l, cond, values)
}

// write stores l (its token in :tok) if cond holds; ErrConflict when it does not.
func (s *leaseStore) write(ctx context.Context, l broker.Lease, cond string, values item) error {
	maps.Copy(values, item{
		":o": str(l.Owner), ":at": num(l.ClaimedAt.UnixMilli()), ":exp": num(l.ExpiresAt.UnixMilli()),
		":ttl": num(l.TTL.Milliseconds()), ":tok": num(int64(l.Token)), ":live": str("1"),
	})
	return s.update(ctx, l.Tenant, "SET #o = :o, claimedAt = :at, expiresAt = :exp, ttlMs = :ttl, #tok = :tok, live = :live", cond, values)
}

// DeleteLease writes the tombstone of t's lease while it carries token version and has not
// run out; ErrConflict otherwise (released already, or taken over).
func (s *leaseStore) DeleteLease(ctx context.Context, t tenant.ID, version uint64) error {
	return s.update(ctx, t, "SET expiresAt = :zero REMOVE #o, live", "#tok = :tok AND expiresAt > :now",
		item{":zero": num(0), ":tok": num(int64(version)), ":now": num(nowMs())})
}

// update applies expr to t's item if cond holds; ErrConflict when it does not.
func (s *leaseStore) update(ctx context.Context, t tenant.ID, expr, cond string, values item) error {
	_, err := s.a.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.a.names.leases),
		Key:                       key(t.String(), noSK),
		UpdateExpression:          aws.String(expr),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  placeholders(expr + " " + cond),
		ExpressionAttributeValues: values,
	})
	if conditionFailed(err) {
		return broker.ErrConflict
	}
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("awsq: write the lease of %s: %w", t, err))
	}
	return nil
}

// nextToken issues a fencing token: strictly increasing across every tenant.
func (s *leaseStore) nextToken(ctx context.Context) (uint64, error) {
	out, err := s.a.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.a.names.leases),
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

// ListLeases returns the tenants' held items (a scan; the rules keep those still live).
func (s *leaseStore) ListLeases(ctx context.Context) ([]broker.Lease, error) {
	items, err := s.a.scan(ctx, s.a.names.leases, func(it item) bool { return getS(it, "live") != "" })
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
func (s *leaseStore) Expired(ctx context.Context) (<-chan tenant.ID, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make(chan tenant.ID, 64)
	go s.watchExpiry(ctx, out)
	return out, nil
}

func (s *leaseStore) watchExpiry(ctx context.Context, out chan<- tenant.ID) {
	defer close(out)
	tick := time.NewTicker(s.a.cfg.ExpiryPoll)
	defer tick.Stop()
	last := time.Now().Add(-s.a.cfg.ClockSkew)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		upTo := time.Now().Add(-s.a.cfg.ClockSkew)
		ts, err := s.expiredBetween(ctx, last, upTo)
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
func (s *leaseStore) expiredBetween(ctx context.Context, from, to time.Time) ([]tenant.ID, error) {
	var ts []tenant.ID
	p := dynamodb.NewQueryPaginator(s.a.ddb, &dynamodb.QueryInput{
		TableName:                 aws.String(s.a.names.leases),
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
