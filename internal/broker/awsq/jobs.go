package awsq

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/webordinary/webordinary/internal/broker"
)

// jobs keeps records in the jobs table: item ("job#<id>", "-") holds the record as JSON in
// "rec" and a compare-and-set version "ver"; item ("recent", "<id>") indexes it by id, written
// before the record, so Recent is one Query newest-first whose cost follows n. Both carry
// "expireAt" (epoch seconds) for DynamoDB TTL, 30 days after the last write.
type jobs struct{ a *adapter }

var (
	_ broker.Jobs        = (*jobs)(nil)
	_ broker.RecordStore = (*jobs)(nil)
)

const (
	recentPK  = "recent"
	retention = broker.JobRetention
)

func jobKey(id string) item { return key("job#"+id, noSK) }

func expireAt() av { return num(time.Now().Add(retention).Unix()) }

func (j *jobs) Create(ctx context.Context, rec broker.JobRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	body, err := jsonString(rec)
	if err != nil {
		return err
	}
	idx := key(recentPK, rec.Job.ID)
	idx["expireAt"] = expireAt()
	if _, err := j.a.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(j.a.names.jobs), Item: idx}); err != nil {
		return ctxErr(ctx, fmt.Errorf("awsq: index job %s: %w", rec.Job.ID, err))
	}
	err = j.put(ctx, rec.Job.ID, body, 1, "attribute_not_exists(pk)", nil, nil)
	if conditionFailed(err) {
		return broker.ErrExists
	}
	return ctxErr(ctx, err)
}

// put writes a record at version ver under condition cond and, with f, in one transaction
// with f's lease check.
func (j *jobs) put(ctx context.Context, id, body string, ver int64, cond string, values item, f *fence) error {
	it := jobKey(id)
	it["rec"], it["ver"], it["expireAt"] = str(body), num(ver), expireAt()
	if len(values) == 0 {
		values = nil
	}
	if f != nil {
		return j.a.writeFenced(ctx, *f, dtypes.TransactWriteItem{Put: &dtypes.Put{TableName: aws.String(j.a.names.jobs),
			Item: it, ConditionExpression: aws.String(cond), ExpressionAttributeValues: values}})
	}
	_, err := j.a.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(j.a.names.jobs), Item: it,
		ConditionExpression: aws.String(cond), ExpressionAttributeValues: values})
	return err
}

func (j *jobs) Get(ctx context.Context, id string) (broker.JobRecord, error) {
	rec, _, err := j.get(ctx, id)
	return rec, ctxErr(ctx, err)
}

func (j *jobs) get(ctx context.Context, id string) (broker.JobRecord, int64, error) {
	it, err := j.a.getItem(ctx, j.a.names.jobs, jobKey(id))
	if err != nil {
		return broker.JobRecord{}, 0, fmt.Errorf("awsq: get job %s: %w", id, err)
	}
	if it == nil {
		return broker.JobRecord{}, 0, broker.ErrNotFound
	}
	rec, err := decodeRecord(it)
	return rec, getN(it, "ver"), err
}

func decodeRecord(it item) (broker.JobRecord, error) {
	var rec broker.JobRecord
	if err := json.Unmarshal([]byte(getS(it, "rec")), &rec); err != nil {
		return rec, fmt.Errorf("awsq: undecodable job record %s: %w", getS(it, attrPK), err)
	}
	return rec, nil
}

// Update is read, fn, conditional put on the version read; a lost race re-reads
// (broker.UpdateRecord).
func (j *jobs) Update(ctx context.Context, id string, fn func(*broker.JobRecord) error) (broker.JobRecord, error) {
	return broker.UpdateRecord(ctx, j, id, fn, nil)
}

// ReadRecord returns id's record and its version.
func (j *jobs) ReadRecord(ctx context.Context, id string) (broker.JobRecord, uint64, error) {
	rec, ver, err := j.get(ctx, id)
	return rec, uint64(ver), ctxErr(ctx, err)
}

// WriteRecord puts rec at the next version if the item is still at version, and with h in one
// transaction with h's lease check.
func (j *jobs) WriteRecord(ctx context.Context, id string, rec broker.JobRecord, version uint64, h *broker.Holder) error {
	body, err := jsonString(rec)
	if err != nil {
		return err
	}
	var f *fence
	if h != nil {
		f = &fence{t: h.Tenant, token: h.Token}
	}
	err = j.put(ctx, id, body, int64(version)+1, "ver = :v", item{":v": num(int64(version))}, f)
	if conditionFailed(err) {
		return broker.ErrConflict
	}
	return ctxErr(ctx, err)
}

// Recent queries the index newest first, then reads the records in one batch.
func (j *jobs) Recent(ctx context.Context, n int) ([]broker.JobRecord, error) {
	if n <= 0 {
		return nil, ctx.Err()
	}
	out, err := j.a.ddb.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(j.a.names.jobs),
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(recentPK)},
		ScanIndexForward:          aws.Bool(false),
		Limit:                     aws.Int32(int32(min(n, 100))),
	})
	if err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("awsq: recent jobs: %w", err))
	}
	ids := make([]string, 0, len(out.Items))
	for _, it := range out.Items {
		ids = append(ids, getS(it, attrSK))
	}
	recs, err := j.batchGet(ctx, ids)
	return recs, ctxErr(ctx, err)
}

// batchGet reads the records of ids (consistent), in the order of ids, skipping missing ones.
func (j *jobs) batchGet(ctx context.Context, ids []string) ([]broker.JobRecord, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	keys := make([]item, len(ids))
	for i, id := range ids {
		keys[i] = jobKey(id)
	}
	byID := map[string]broker.JobRecord{}
	req := map[string]dtypes.KeysAndAttributes{j.a.names.jobs: {Keys: keys, ConsistentRead: aws.Bool(true)}}
	for len(req) > 0 {
		out, err := j.a.ddb.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return nil, fmt.Errorf("awsq: recent jobs: %w", err)
		}
		for _, it := range out.Responses[j.a.names.jobs] {
			rec, err := decodeRecord(it)
			if err != nil {
				return nil, err
			}
			byID[rec.Job.ID] = rec
		}
		req = out.UnprocessedKeys
	}
	recs := make([]broker.JobRecord, 0, len(ids))
	for _, id := range ids {
		if rec, ok := byID[id]; ok {
			recs = append(recs, rec)
		}
	}
	return recs, nil
}

// Wait polls the record, 100 ms at first, backing off to 1 s.
func (j *jobs) Wait(ctx context.Context, id string, until func(broker.JobRecord) bool) (broker.JobRecord, error) {
	every := 100 * time.Millisecond
	for {
		rec, err := j.Get(ctx, id)
		if err == nil && until(rec) {
			return rec, nil
		}
		if err != nil && err != broker.ErrNotFound {
			return broker.JobRecord{}, err
		}
		select {
		case <-ctx.Done():
			return broker.JobRecord{}, ctx.Err()
		case <-time.After(every):
		}
		every = min(2*every, time.Second)
	}
}

func jsonString(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
