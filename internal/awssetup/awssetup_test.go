package awssetup_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/webordinary/webordinary/internal/awssetup"
	"github.com/webordinary/webordinary/internal/awstest"
	"github.com/webordinary/webordinary/internal/broker/awsq/awsqtest"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// TestSetupIsIdempotent: a second run finds everything and changes nothing; the resources
// exist afterwards (fauxqs for SQS, SNS and S3; dynalite for DynamoDB).
func TestSetupIsIdempotent(t *testing.T) {
	t.Parallel()
	fauxqs, dynalite := awstest.FauxQS(t), awstest.Dynalite(t)
	prefix := awsqtest.Prefix()
	ctx := context.Background()
	for run := 1; run <= 2; run++ {
		steps, err := awssetup.Setup(ctx, awssetup.Config{Prefix: prefix, Region: "us-east-1", Endpoint: fauxqs, DynamoDBEndpoint: dynalite})
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		for _, s := range steps {
			t.Logf("run %d: %-50s %s", run, s.Resource, s.Result)
		}
	}
	n := awssetup.NamesFor(prefix)
	ac := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
	q := sqs.NewFromConfig(ac, func(o *sqs.Options) { o.BaseEndpoint = aws.String(fauxqs) })
	for _, name := range []string{n.ClaimsQueue, n.ResultsQueue, n.InboundQueue, n.InboundDLQ} {
		if _, err := q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)}); err != nil {
			t.Errorf("queue %s: %v", name, err)
		}
	}
	b := s3.NewFromConfig(ac, func(o *s3.Options) { o.BaseEndpoint, o.UsePathStyle = aws.String(fauxqs), true })
	for _, name := range []string{n.SitesBucket, n.InboundBucket, n.PayloadBucket} {
		if _, err := b.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(name)}); err != nil {
			t.Errorf("bucket %s: %v", name, err)
		}
	}
	if !strings.HasPrefix(n.InboundQueue, prefix) {
		t.Errorf("inbound queue %q does not carry the prefix", n.InboundQueue)
	}
}
