package natsjs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
)

// blobOpener opens the object store bucket wo_b_<name> of each blob store once per backend.
type blobOpener struct {
	a      *adapter
	mu     sync.Mutex
	stores map[string]*blobs
}

func newBlobOpener(a *adapter) *blobOpener { return &blobOpener{a: a, stores: map[string]*blobs{}} }

func (o *blobOpener) open(ctx context.Context, name string, opts ...broker.BlobOption) (broker.Blobs, error) {
	if !tableName.MatchString(name) {
		return nil, fmt.Errorf("natsjs: blob store name %q must match ^[a-z0-9_]+$", name)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if b := o.stores[name]; b != nil {
		return b, nil
	}
	maxAge := broker.BlobConfig(opts).MaxAge
	cfg := jetstream.ObjectStoreConfig{Bucket: "wo_b_" + name, Storage: jetstream.FileStorage, Replicas: o.a.cfg.Replicas, TTL: maxAge}
	obs, err := settle(ctx, o.a, func(ctx context.Context) (jetstream.ObjectStore, error) {
		return o.a.js.CreateOrUpdateObjectStore(ctx, cfg)
	})
	if err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("natsjs: object store %s: %w", name, err))
	}
	b := &blobs{obs: obs, maxAge: maxAge}
	o.stores[name] = b
	return b, nil
}

// blobs is a JetStream object store. A version is the object's NUID, new on every put. With
// a MaxAge the server removes objects by age (the stream's MaxAge), and reads check the age
// too: the server's expiry runs on a timer.
type blobs struct {
	obs    jetstream.ObjectStore
	maxAge time.Duration
}

// readableFor is how long after its Put a blob is read: a tenth of the max age (at most a
// minute) short of it. The object's chunks were stored before its info, which dates it, so
// the server expires them first, and a read of a blob at the edge would wait for chunks
// that are gone until its deadline instead of saying ErrNotFound.
func (b *blobs) readableFor() time.Duration {
	if b.maxAge <= 0 {
		return 0
	}
	return b.maxAge - min(b.maxAge/10, time.Minute)
}

var _ broker.Blobs = (*blobs)(nil)

func checkBlobKey(key string) error {
	if !broker.BlobKey.MatchString(key) {
		return fmt.Errorf("natsjs: blob key %q must match %s", key, broker.BlobKey)
	}
	return nil
}

func (b *blobs) Put(ctx context.Context, key string, value []byte) (string, error) {
	if err := checkBlobKey(key); err != nil {
		return "", err
	}
	if len(value) > broker.MaxBlobSize {
		return "", fmt.Errorf("natsjs: blob %s is %d bytes, over %d: %w", key, len(value), broker.MaxBlobSize, broker.ErrTooLarge)
	}
	info, err := b.obs.PutBytes(ctx, key, value)
	if err != nil {
		return "", ctxErr(ctx, fmt.Errorf("natsjs: put blob %s: %w", key, err))
	}
	return info.NUID, nil
}

func (b *blobs) Get(ctx context.Context, key string) ([]byte, string, error) {
	if err := checkBlobKey(key); err != nil {
		return nil, "", err
	}
	res, err := b.obs.Get(ctx, key)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, "", broker.ErrNotFound
	}
	if err != nil {
		return nil, "", ctxErr(ctx, fmt.Errorf("natsjs: get blob %s: %w", key, err))
	}
	defer res.Close()
	info, err := res.Info()
	if err != nil {
		return nil, "", ctxErr(ctx, fmt.Errorf("natsjs: get blob %s: %w", key, err))
	}
	if broker.BlobExpired(info.ModTime, b.readableFor(), time.Now()) {
		return nil, "", broker.ErrNotFound
	}
	value, err := io.ReadAll(res)
	if err != nil {
		return nil, "", ctxErr(ctx, fmt.Errorf("natsjs: read blob %s: %w", key, err))
	}
	return value, info.NUID, nil
}

func (b *blobs) Version(ctx context.Context, key string) (string, error) {
	if err := checkBlobKey(key); err != nil {
		return "", err
	}
	info, err := b.obs.GetInfo(ctx, key)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return "", broker.ErrNotFound
	}
	if err != nil {
		return "", ctxErr(ctx, fmt.Errorf("natsjs: blob %s: %w", key, err))
	}
	if broker.BlobExpired(info.ModTime, b.readableFor(), time.Now()) {
		return "", broker.ErrNotFound
	}
	return info.NUID, nil
}

func (b *blobs) Delete(ctx context.Context, key string) error {
	if err := checkBlobKey(key); err != nil {
		return err
	}
	err := b.obs.Delete(ctx, key)
	if err == nil || errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil
	}
	return ctxErr(ctx, fmt.Errorf("natsjs: delete blob %s: %w", key, err))
}
