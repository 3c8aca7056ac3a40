package awsq

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/webordinary/webordinary/internal/broker"
)

// presence keeps one item per worker in the workers table (pk = worker id): its announcement
// as JSON in "info", "expiresAt" (ms) for List and "expireAt" (epoch s) for DynamoDB TTL.
type presence struct{ a *adapter }

var _ broker.Presence = (*presence)(nil)

func (p *presence) Announce(ctx context.Context, w broker.WorkerInfo, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	body, err := jsonString(w)
	if err != nil {
		return err
	}
	exp := time.Now().Add(ttl)
	it := key(w.ID, noSK)
	it["info"], it["expiresAt"], it["expireAt"] = str(body), num(exp.UnixMilli()), num(exp.Unix()+60)
	if _, err := p.a.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(p.a.names.workers), Item: it}); err != nil {
		return ctxErr(ctx, fmt.Errorf("awsq: announce %s: %w", w.ID, err))
	}
	return nil
}

func (p *presence) Leave(ctx context.Context, id string) error {
	_, err := p.a.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(p.a.names.workers), Key: key(id, noSK)})
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("awsq: leave %s: %w", id, err))
	}
	return nil
}

func (p *presence) List(ctx context.Context) ([]broker.WorkerInfo, error) {
	now := nowMs()
	items, err := p.a.scan(ctx, p.a.names.workers, func(it item) bool { return getN(it, "expiresAt") > now })
	if err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("awsq: list workers: %w", err))
	}
	out := make([]broker.WorkerInfo, 0, len(items))
	for _, it := range items {
		var w broker.WorkerInfo
		if err := json.Unmarshal([]byte(getS(it, "info")), &w); err == nil {
			out = append(out, w)
		}
	}
	return out, nil
}
