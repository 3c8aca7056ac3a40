package broker

import (
	"context"
	"regexp"
	"time"
)

// MaxBlobSize is the largest blob every backend must accept: 64 MiB. A backend may take more;
// a larger Put is ErrTooLarge.
const MaxBlobSize = 64 << 20

// BlobKey is what a blob key may be: lowercase letters, digits and "-_.=/", not starting with
// "/" or "." (a tenant's "<project>.<user>", a content hash "sha256/<hex>"). The same keys work
// as NATS object names and S3 keys under a prefix.
var BlobKey = regexp.MustCompile(`^[a-z0-9_=-][a-z0-9._=/-]{0,255}$`)

// Blobs is a named store of opaque values larger than records: a tenant's agent state between
// jobs (store "states", key "<project>.<user>"), content-addressed preview files. Open one with
// Backend.Blobs. NATS: a JetStream object store bucket; S3: a prefix in a bucket (version =
// the object's ETag or VersionId).
//
// Every method is safe for concurrent use, may block on one round trip to the engine (Put and
// Get on the transfer too) and does not retry: the caller decides. A Put is atomic: a Get sees
// the previous value or the new one, never a mix.
type Blobs interface {
	// Put stores value under key, replacing any previous value, and returns its version: an
	// opaque string that differs from every earlier version of key (so a holder of a copy can
	// tell whether it is current). A value over the backend's limit (at least MaxBlobSize)
	// is ErrTooLarge, and the previous value stays.
	Put(ctx context.Context, key string, value []byte) (version string, err error)
	// Get returns key's value and version, or ErrNotFound.
	Get(ctx context.Context, key string) (value []byte, version string, err error)
	// Version returns key's current version without its value, or ErrNotFound: the cheap
	// check before a Get.
	Version(ctx context.Context, key string) (string, error)
	// Delete removes key. Idempotent.
	Delete(ctx context.Context, key string) error
}

// BlobOption configures a blob store as Backend.Blobs opens it.
type BlobOption func(*BlobOptions)

// BlobOptions are what the BlobOption values given set; a backend reads them with BlobConfig.
type BlobOptions struct {
	// MaxAge, when positive, ends each blob MaxAge after its last Put: Get and Version say
	// ErrNotFound from then on, and the engine reclaims the space (NATS: the object store's
	// TTL; S3: the lifecycle rule `aws setup` and the template put on the store's prefix).
	// Every process must open a store with the same MaxAge (NATS keeps the last one given).
	MaxAge time.Duration
}

// BlobMaxAge ends each blob d after its last Put (see BlobOptions.MaxAge).
func BlobMaxAge(d time.Duration) BlobOption { return func(o *BlobOptions) { o.MaxAge = d } }

// BlobConfig applies opts.
func BlobConfig(opts []BlobOption) BlobOptions {
	var o BlobOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// BlobExpired says whether a blob last put at put is past maxAge (0: never) at now.
func BlobExpired(put time.Time, maxAge time.Duration, now time.Time) bool {
	return maxAge > 0 && !put.IsZero() && now.Sub(put) > maxAge
}
