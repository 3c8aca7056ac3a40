package s3target_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"

	"github.com/webordinary/webordinary/internal/awstest"
	"github.com/webordinary/webordinary/internal/preview"
	"github.com/webordinary/webordinary/internal/preview/previewtest"
	"github.com/webordinary/webordinary/internal/preview/s3target"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// TestConformance runs previewtest on fauxqs's S3, read back through the store's Server.
func TestConformance(t *testing.T) {
	previewtest.Run(t, previewtest.Harness{New: func(t *testing.T) previewtest.Instance {
		store, ts := setup(t, nil)
		return previewtest.Instance{Target: store, Get: func(ctx context.Context, site preview.Site, latest bool, path string) (int, string, error) {
			host := "edit." + site.Project + ".localhost"
			if !latest {
				host = site.Thread + "." + host
			}
			return get(ctx, ts, host, path)
		}}
	}})
}

// setup returns a store on a fresh bucket of the shared fauxqs and a server for it.
func setup(t *testing.T, apiOptions []func(*middleware.Stack) error) (*s3target.Store, *httptest.Server) {
	t.Helper()
	store, ts, _, _ := setupRaw(t, apiOptions)
	return store, ts
}

// setupRaw is setup that also returns the client and the bucket.
func setupRaw(t *testing.T, apiOptions []func(*middleware.Stack) error) (*s3target.Store, *httptest.Server, *s3.Client, string) {
	t.Helper()
	client := newClient(t, apiOptions)
	bucket := freshBucket(t, client)
	store, err := s3target.New(s3target.Config{Client: client, Bucket: bucket, Prefix: "site/"})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(store.Server(true))
	t.Cleanup(ts.Close)
	return store, ts, client, bucket
}

func newClient(t *testing.T, apiOptions []func(*middleware.Stack) error) *s3.Client {
	t.Helper()
	endpoint := awstest.FauxQS(t)
	ac := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
	return s3.NewFromConfig(ac, func(o *s3.Options) {
		o.BaseEndpoint, o.UsePathStyle = aws.String(endpoint), true
		o.APIOptions = append(o.APIOptions, apiOptions...)
	})
}

func freshBucket(t *testing.T, client *s3.Client) string {
	t.Helper()
	var b [5]byte
	_, _ = rand.Read(b[:])
	name := "t" + hex.EncodeToString(b[:]) + "-sites"
	if _, err := client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatal(err)
	}
	return name
}

// get fetches path with the given Host header.
func get(ctx context.Context, ts *httptest.Server, host, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	resp, err := ts.Client().Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
