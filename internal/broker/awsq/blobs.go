package awsq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	stypes "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/webordinary/webordinary/internal/broker"

	"github.com/webordinary/webordinary/internal/awserr"
)

// blobVersionMeta is the object metadata that carries a blob's version. The ETag cannot serve:
// two Puts of the same content have the same ETag, and a version must differ on every Put.
const blobVersionMeta = "wo-version"

// blobs opens the blob store name: the key prefix "blobs/<name>/" of the payload bucket
// (Config.Bucket). Nothing is created; the bucket exists since New.
func (a *adapter) blobs(ctx context.Context, name string, opts ...broker.BlobOption) (broker.Blobs, error) {
	if !tableName.MatchString(name) {
		return nil, fmt.Errorf("awsq: blob store name %q must match %s", name, tableName)
	}
	return &blobs{a: a, prefix: BlobPrefix(name), maxAge: broker.BlobConfig(opts).MaxAge}, ctx.Err()
}

// BlobPrefix is where the blob store name keeps its objects in the payload bucket: a
// store with a MaxAge needs a lifecycle rule on it (awssetup) to reclaim the space.
func BlobPrefix(name string) string { return "blobs/" + name + "/" }

// blobs is one blob store: whole objects under a prefix, each Put one PutObject (atomic).
// With a MaxAge, reads treat an object older than it as gone; the bucket's lifecycle rule
// deletes it (at day granularity).
type blobs struct {
	a      *adapter
	prefix string
	maxAge time.Duration
}

var _ broker.Blobs = (*blobs)(nil)

func (b *blobs) key(key string) (*string, error) {
	if !broker.BlobKey.MatchString(key) {
		return nil, fmt.Errorf("awsq: blob key %q must match %s", key, broker.BlobKey)
	}
	return aws.String(b.prefix + key), nil
}

// Put implements broker.Blobs: the version is a fresh token stored with the object.
func (b *blobs) Put(ctx context.Context, key string, value []byte) (string, error) {
	k, err := b.key(key)
	if err != nil {
		return "", err
	}
	if len(value) > broker.MaxBlobSize {
		return "", fmt.Errorf("%w: blob %s is %d bytes, at most %d", broker.ErrTooLarge, key, len(value), broker.MaxBlobSize)
	}
	version := strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + randomID()
	_, err = b.a.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b.a.cfg.Bucket), Key: k,
		Body: bytes.NewReader(value), ContentLength: aws.Int64(int64(len(value))),
		Metadata: map[string]string{blobVersionMeta: version}})
	if err != nil {
		return "", fmt.Errorf("awsq: put blob %s: %w", key, ctxErr(ctx, err))
	}
	return version, nil
}

// Get implements broker.Blobs.
func (b *blobs) Get(ctx context.Context, key string) ([]byte, string, error) {
	k, err := b.key(key)
	if err != nil {
		return nil, "", err
	}
	out, err := b.a.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.a.cfg.Bucket), Key: k})
	if err != nil {
		return nil, "", b.fail(ctx, "get", key, err)
	}
	defer out.Body.Close()
	if broker.BlobExpired(aws.ToTime(out.LastModified), b.maxAge, time.Now()) {
		return nil, "", fmt.Errorf("awsq: blob %s: past its store's max age: %w", key, broker.ErrNotFound)
	}
	value, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, "", fmt.Errorf("awsq: get blob %s: %w", key, ctxErr(ctx, err))
	}
	return value, out.Metadata[blobVersionMeta], nil
}

// Version implements broker.Blobs with one HeadObject.
func (b *blobs) Version(ctx context.Context, key string) (string, error) {
	k, err := b.key(key)
	if err != nil {
		return "", err
	}
	out, err := b.a.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(b.a.cfg.Bucket), Key: k})
	if err != nil {
		return "", b.fail(ctx, "read the version of", key, err)
	}
	if broker.BlobExpired(aws.ToTime(out.LastModified), b.maxAge, time.Now()) {
		return "", fmt.Errorf("awsq: blob %s: past its store's max age: %w", key, broker.ErrNotFound)
	}
	return out.Metadata[blobVersionMeta], nil
}

// Delete implements broker.Blobs; a missing key is not an error.
func (b *blobs) Delete(ctx context.Context, key string) error {
	k, err := b.key(key)
	if err != nil {
		return err
	}
	_, err = b.a.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.a.cfg.Bucket), Key: k})
	if err != nil && !awserr.HasCode(err, "NoSuchKey", "NotFound") {
		return fmt.Errorf("awsq: delete blob %s: %w", key, ctxErr(ctx, err))
	}
	return nil
}

// fail maps a missing object onto broker.ErrNotFound and wraps anything else once.
func (b *blobs) fail(ctx context.Context, op, key string, err error) error {
	var nsk *stypes.NoSuchKey
	var nf *stypes.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) || awserr.HasCode(err, "NoSuchKey", "NotFound") {
		return fmt.Errorf("awsq: blob %s: %w", key, broker.ErrNotFound)
	}
	return fmt.Errorf("awsq: %s blob %s: %w", op, key, ctxErr(ctx, err))
}
