package awsq

import (
	"context"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// item is a DynamoDB item; av is one attribute value.
type (
	item = map[string]dtypes.AttributeValue
	av   = dtypes.AttributeValue
)

func str(s string) av    { return &dtypes.AttributeValueMemberS{Value: s} }
func num(n int64) av     { return &dtypes.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)} }
func bin(b []byte) av    { return &dtypes.AttributeValueMemberB{Value: b} }
func set(s ...string) av { return &dtypes.AttributeValueMemberSS{Value: s} }

// key is the primary key (pk, sk).
func key(pk, sk string) item { return item{attrPK: str(pk), attrSK: str(sk)} }

// getS returns a string attribute, or "".
func getS(it item, name string) string {
	if v, ok := it[name].(*dtypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// getN returns a number attribute, or 0.
func getN(it item, name string) int64 {
	if v, ok := it[name].(*dtypes.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

// getB returns a binary attribute, or nil.
func getB(it item, name string) []byte {
	if v, ok := it[name].(*dtypes.AttributeValueMemberB); ok {
		return v.Value
	}
	return nil
}

// getSS returns a string set attribute, or nil.
func getSS(it item, name string) []string {
	if v, ok := it[name].(*dtypes.AttributeValueMemberSS); ok {
		return v.Value
	}
	return nil
}

// getItem reads one item with a consistent read; nil when there is none.
func (a *adapter) getItem(ctx context.Context, table string, k item) (item, error) {
	out, err := a.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: k, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, err
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

// scan reads every item of table (consistent, all pages), keeping those keep accepts.
func (a *adapter) scan(ctx context.Context, table string, keep func(item) bool) ([]item, error) {
	var items []item
	p := dynamodb.NewScanPaginator(a.ddb, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, it := range out.Items {
			if keep(it) {
				items = append(items, it)
			}
		}
	}
	return items, nil
}

// queryPK reads the items of partition pk (consistent, all pages), sort keys ascending.
func (a *adapter) queryPK(ctx context.Context, table, pk string) ([]item, error) {
	var items []item
	p := dynamodb.NewQueryPaginator(a.ddb, &dynamodb.QueryInput{
		TableName:                 aws.String(table),
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(pk)},
	})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		items = append(items, out.Items...)
	}
	return items, nil
}
