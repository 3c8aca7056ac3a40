package awsq

import (
	"context"
	"fmt"
	"regexp"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/webordinary/webordinary/internal/broker"
)

// tableName is what broker.Backend.Table accepts.
var tableName = regexp.MustCompile(`^[a-z0-9_]+$`)

// table is one named table of the shared DynamoDB table "<prefix>_tables": pk = the table's
// name, sk = the key, "val" the bytes, "ver" the compare-and-set version. DynamoDB returns sort
// keys in byte order, which is Go's string order, so Keys needs no sorting.
type table struct {
	a    *adapter
	name string
}

var _ broker.Table = (*table)(nil)

func (a *adapter) table(ctx context.Context, name string) (broker.Table, error) {
	if !tableName.MatchString(name) {
		return nil, fmt.Errorf("awsq: table name %q must match %s", name, tableName)
	}
	return &table{a: a, name: name}, ctx.Err()
}

func (tb *table) Get(ctx context.Context, k string) ([]byte, uint64, error) {
	it, err := tb.a.getItem(ctx, tb.a.names.tables, key(tb.name, k))
	if err != nil {
		return nil, 0, ctxErr(ctx, fmt.Errorf("awsq: get %s/%s: %w", tb.name, k, err))
	}
	if it == nil {
		return nil, 0, broker.ErrNotFound
	}
	return getB(it, "val"), uint64(getN(it, "ver")), nil
}

func (tb *table) Create(ctx context.Context, k string, value []byte) (uint64, error) {
	err := tb.write(ctx, k, value, 1, "attribute_not_exists(pk)", nil)
	if conditionFailed(err) {
		return 0, broker.ErrExists
	}
	return 1, ctxErr(ctx, err)
}

func (tb *table) Update(ctx context.Context, k string, value []byte, version uint64) (uint64, error) {
	err := tb.write(ctx, k, value, int64(version)+1, "ver = :v", item{":v": num(int64(version))})
	if conditionFailed(err) {
		return 0, broker.ErrConflict
	}
	return version + 1, ctxErr(ctx, err)
}

func (tb *table) write(ctx context.Context, k string, value []byte, ver int64, cond string, values item) error {
	it := key(tb.name, k)
	it["val"], it["ver"] = bin(value), num(ver)
	in := &dynamodb.PutItemInput{TableName: aws.String(tb.a.names.tables), Item: it, ConditionExpression: aws.String(cond)}
	if len(values) > 0 {
		in.ExpressionAttributeValues = values
	}
	_, err := tb.a.ddb.PutItem(ctx, in)
	if err != nil && !conditionFailed(err) {
		return fmt.Errorf("awsq: write %s/%s: %w", tb.name, k, err)
	}
	return err
}

func (tb *table) Put(ctx context.Context, k string, value []byte) (uint64, error) {
	out, err := tb.a.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(tb.a.names.tables),
		Key:                       key(tb.name, k),
		UpdateExpression:          aws.String("SET val = :val ADD ver :one"),
		ExpressionAttributeValues: item{":val": bin(value), ":one": num(1)},
		ReturnValues:              dtypes.ReturnValueUpdatedNew,
	})
	if err != nil {
		return 0, ctxErr(ctx, fmt.Errorf("awsq: put %s/%s: %w", tb.name, k, err))
	}
	return uint64(getN(out.Attributes, "ver")), nil
}

func (tb *table) Delete(ctx context.Context, k string) error {
	_, err := tb.a.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(tb.a.names.tables), Key: key(tb.name, k)})
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("awsq: delete %s/%s: %w", tb.name, k, err))
	}
	return nil
}

func (tb *table) Keys(ctx context.Context) ([]string, error) {
	items, err := tb.a.queryPK(ctx, tb.a.names.tables, tb.name)
	if err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("awsq: keys of %s: %w", tb.name, err))
	}
	keys := make([]string, len(items))
	for i, it := range items {
		keys[i] = getS(it, attrSK)
	}
	return keys, nil
}
