package awsq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	qtypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/webordinary/webordinary/internal/awserr"
)

// Every table has the key (pk, sk), both strings; items without a natural sort key use sk "-".
// The leases table also has the sparse index expiryIndex on (live, expiresAt).
const (
	attrPK      = "pk"
	attrSK      = "sk"
	noSK        = "-"
	expiryIndex = "live-by-expiry"
)

// setup creates what is missing: tables, the shared queues and the payload bucket.
func (a *adapter) setup(ctx context.Context) error {
	for _, name := range a.names.allTables() {
		if err := a.createTable(ctx, name); err != nil {
			return fmt.Errorf("awsq: create table %s: %w", name, ctxErr(ctx, err))
		}
	}
	if _, err := a.queueURL(ctx, a.names.claims); err != nil {
		return err
	}
	if _, err := a.queueURL(ctx, a.names.results); err != nil {
		return err
	}
	return a.createBucket(ctx)
}

func (a *adapter) createTable(ctx context.Context, name string) error {
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: dtypes.BillingModePayPerRequest,
		AttributeDefinitions: []dtypes.AttributeDefinition{
			{AttributeName: aws.String(attrPK), AttributeType: dtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrSK), AttributeType: dtypes.ScalarAttributeTypeS},
		},
		KeySchema: []dtypes.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: dtypes.KeyTypeHash},
			{AttributeName: aws.String(attrSK), KeyType: dtypes.KeyTypeRange},
		},
	}
	if name == a.names.leases {
		addExpiryIndex(in)
	}
	_, err := a.ddb.CreateTable(ctx, in)
	var inUse *dtypes.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return err
	}
	return a.awaitTable(ctx, name)
}

// addExpiryIndex adds the sparse index of live leases by expiry: only held leases carry "live".
func addExpiryIndex(in *dynamodb.CreateTableInput) {
	in.AttributeDefinitions = append(in.AttributeDefinitions,
		dtypes.AttributeDefinition{AttributeName: aws.String("live"), AttributeType: dtypes.ScalarAttributeTypeS},
		dtypes.AttributeDefinition{AttributeName: aws.String("expiresAt"), AttributeType: dtypes.ScalarAttributeTypeN})
	in.GlobalSecondaryIndexes = []dtypes.GlobalSecondaryIndex{{
		IndexName: aws.String(expiryIndex),
		KeySchema: []dtypes.KeySchemaElement{
			{AttributeName: aws.String("live"), KeyType: dtypes.KeyTypeHash},
			{AttributeName: aws.String("expiresAt"), KeyType: dtypes.KeyTypeRange},
		},
		Projection: &dtypes.Projection{ProjectionType: dtypes.ProjectionTypeKeysOnly},
	}}
}

// awaitTable waits until name is ACTIVE (emulators are at once; AWS takes seconds).
func (a *adapter) awaitTable(ctx context.Context, name string) error {
	for {
		out, err := a.ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			return err
		}
		if out.Table.TableStatus == dtypes.TableStatusActive {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (a *adapter) createBucket(ctx context.Context) error {
	_, err := a.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(a.cfg.Bucket)})
	var owned interface{ ErrorCode() string }
	if err != nil && errors.As(err, &owned) && (owned.ErrorCode() == "BucketAlreadyOwnedByYou" || owned.ErrorCode() == "BucketAlreadyExists") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("awsq: create bucket %s: %w", a.cfg.Bucket, ctxErr(ctx, err))
	}
	return nil
}

// queueURL returns name's URL, creating the queue when it does not exist. Cached.
func (a *adapter) queueURL(ctx context.Context, name string) (string, error) {
	if u, ok := a.urls.Load(name); ok {
		return u.(string), nil
	}
	out, err := a.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err == nil {
		a.urls.Store(name, *out.QueueUrl)
		return *out.QueueUrl, nil
	}
	if !noSuchQueue(err) {
		return "", fmt.Errorf("awsq: queue %s: %w", name, ctxErr(ctx, err))
	}
	return a.createQueue(ctx, name)
}

// existingQueueURL returns name's URL, or "" when the queue does not exist.
func (a *adapter) existingQueueURL(ctx context.Context, name string) (string, error) {
	if u, ok := a.urls.Load(name); ok {
		return u.(string), nil
	}
	out, err := a.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if noSuchQueue(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	a.urls.Store(name, *out.QueueUrl)
	return *out.QueueUrl, nil
}

// forgetQueue drops name's cached URL after the queue was found missing.
func (a *adapter) forgetQueue(name string) { a.urls.Delete(name) }

// createQueue creates name with the attributes its kind needs (idempotent on equal attributes).
func (a *adapter) createQueue(ctx context.Context, name string) (string, error) {
	out, err := a.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: a.queueAttributes(name)})
	if err != nil {
		return "", fmt.Errorf("awsq: create queue %s: %w", name, ctxErr(ctx, err))
	}
	a.urls.Store(name, *out.QueueUrl)
	return *out.QueueUrl, nil
}

func (a *adapter) queueAttributes(name string) map[string]string {
	attrs := map[string]string{
		string(qtypes.QueueAttributeNameMessageRetentionPeriod): "1209600", // 14 days, the maximum
		string(qtypes.QueueAttributeNameVisibilityTimeout):      "30",
	}
	if len(name) > 5 && name[len(name)-5:] == ".fifo" {
		attrs[string(qtypes.QueueAttributeNameFifoQueue)] = "true"
		attrs[string(qtypes.QueueAttributeNameContentBasedDeduplication)] = "false"
	}
	if name == a.names.claims {
		attrs[string(qtypes.QueueAttributeNameVisibilityTimeout)] = strconv.Itoa(seconds(a.cfg.ClaimAckWait))
	}
	return attrs
}

// noSuchQueue reports whether err says the queue does not exist.
func noSuchQueue(err error) bool {
	var qe *qtypes.QueueDoesNotExist
	if errors.As(err, &qe) {
		return true
	}
	return awserr.HasCode(err, "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist", "NonExistentQueue")
}

// staleHandle reports whether err says a receipt handle no longer names an in-flight delivery.
func staleHandle(err error) bool {
	return awserr.HasCode(err, "MessageNotInflight", "ReceiptHandleIsInvalid", "AWS.SimpleQueueService.MessageNotInflight", "InvalidParameterValue")
}

// conditionFailed reports whether err is a failed DynamoDB condition.
func conditionFailed(err error) bool {
	var cf *dtypes.ConditionalCheckFailedException
	return errors.As(err, &cf) || awserr.HasCode(err, "ConditionalCheckFailedException")
}

// seconds rounds d up to whole seconds (SQS visibility and waits).
func seconds(d time.Duration) int {
	return int((d + time.Second - 1) / time.Second)
}
