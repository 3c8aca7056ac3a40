package awssetup_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
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
	// fauxqs takes lifecycle rules but gives none back: what setup sends is read on the way.
	lifecycles := recordLifecycles(t, fauxqs)
	for run := 1; run <= 2; run++ {
		steps, err := awssetup.Setup(ctx, awssetup.Config{Prefix: prefix, Region: "us-east-1", Endpoint: lifecycles.url, DynamoDBEndpoint: dynalite})
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
	// The payload bucket's rules expire payloads (15 days) and pictures (30) and nothing
	// else: a tenant's agent state (blobs/states/) outlives any number of idle days.
	var got []string
	for _, r := range lifecycles.rules(n.PayloadBucket) {
		got = append(got, fmt.Sprintf("%s %d", r.Prefix, r.Days))
		if strings.HasPrefix("blobs/states/x", r.Prefix) {
			t.Errorf("rule %s (prefix %q) expires agent state", r.ID, r.Prefix)
		}
	}
	want := []string{fmt.Sprintf("blobs/shots/ %d", awssetup.PicturesDays), fmt.Sprintf("inbox/ %d", awssetup.PayloadDays), fmt.Sprintf("results/ %d", awssetup.PayloadDays)}
	if slices.Sort(got); !slices.Equal(got, want) {
		t.Errorf("payload bucket rules (prefix, days) %q; want %q", got, want)
	}
	if !strings.HasPrefix(n.InboundQueue, prefix) {
		t.Errorf("inbound queue %q does not carry the prefix", n.InboundQueue)
	}
}

// lifecycleRecorder forwards to an emulator and keeps the last lifecycle rules put on each bucket.
type lifecycleRecorder struct {
	url  string
	mu   sync.Mutex
	last map[string][]lifecycleRule
}

type lifecycleRule struct {
	ID     string `xml:"ID"`
	Prefix string `xml:"Filter>Prefix"`
	Days   int32  `xml:"Expiration>Days"`
}

func recordLifecycles(t *testing.T, emulator string) *lifecycleRecorder {
	t.Helper()
	target, err := url.Parse(emulator)
	if err != nil {
		t.Fatal(err)
	}
	r := &lifecycleRecorder{last: map[string][]lifecycleRule{}}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if _, ok := req.URL.Query()["lifecycle"]; ok && req.Method == http.MethodPut {
			body, _ := io.ReadAll(req.Body)
			req.Body = io.NopCloser(bytes.NewReader(body))
			var cfg struct {
				Rules []lifecycleRule `xml:"Rule"`
			}
			if err := xml.Unmarshal(body, &cfg); err != nil {
				t.Errorf("lifecycle configuration %s: %v", body, err)
			}
			r.mu.Lock()
			r.last[strings.Trim(req.URL.Path, "/")] = cfg.Rules
			r.mu.Unlock()
		}
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func (r *lifecycleRecorder) rules(bucket string) []lifecycleRule {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[bucket]
}
