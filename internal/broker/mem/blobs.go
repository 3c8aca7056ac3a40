package mem

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
)

// blobStore holds the blob stores by name; every client sees the same ones.
type blobStore struct {
	mu     sync.Mutex
	rev    uint64 // one counter for every store: versions never repeat
	stores map[string]map[string]blob
}

type blob struct {
	value   []byte
	version string
	at      time.Time // its Put
}

func newBlobStore() *blobStore { return &blobStore{stores: map[string]map[string]blob{}} }

func (c *conn) blobs(ctx context.Context, name string, opts ...broker.BlobOption) (broker.Blobs, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	if !tableName.MatchString(name) {
		return nil, fmt.Errorf("mem: blob store name %q must match ^[a-z0-9_]+$", name)
	}
	s := c.e.blobs
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stores[name] == nil {
		s.stores[name] = map[string]blob{}
	}
	return &blobs{c: c, name: name, maxAge: broker.BlobConfig(opts).MaxAge}, nil
}

// blobs is one client's handle on a blob store.
type blobs struct {
	c      *conn
	name   string
	maxAge time.Duration
}

// live returns key's blob unless it is missing or past the store's MaxAge (then it goes).
// The caller holds the store's lock.
func (b *blobs) live(m map[string]blob, key string) (blob, bool) {
	bl, ok := m[key]
	if ok && broker.BlobExpired(bl.at, b.maxAge, time.Now()) {
		delete(m, key)
		return blob{}, false
	}
	return bl, ok
}

var _ broker.Blobs = (*blobs)(nil)

func (b *blobs) start(ctx context.Context, key string) (map[string]blob, error) {
	if err := b.c.check(ctx); err != nil {
		return nil, err
	}
	if !broker.BlobKey.MatchString(key) {
		return nil, fmt.Errorf("mem: blob key %q must match %s", key, broker.BlobKey)
	}
	b.c.e.blobs.mu.Lock()
	return b.c.e.blobs.stores[b.name], nil
}

func (b *blobs) Put(ctx context.Context, key string, value []byte) (string, error) {
	if len(value) > b.c.e.cfg.MaxBlobSize {
		return "", fmt.Errorf("mem: blob %s is %d bytes, over %d: %w", key, len(value), b.c.e.cfg.MaxBlobSize, broker.ErrTooLarge)
	}
	m, err := b.start(ctx, key)
	if err != nil {
		return "", err
	}
	defer b.c.e.blobs.mu.Unlock()
	b.c.e.blobs.rev++
	v := strconv.FormatUint(b.c.e.blobs.rev, 10)
	m[key] = blob{value: bytes.Clone(value), version: v, at: time.Now()}
	return v, nil
}

func (b *blobs) Get(ctx context.Context, key string) ([]byte, string, error) {
	m, err := b.start(ctx, key)
	if err != nil {
		return nil, "", err
	}
	defer b.c.e.blobs.mu.Unlock()
	bl, ok := b.live(m, key)
	if !ok {
		return nil, "", broker.ErrNotFound
	}
	return bytes.Clone(bl.value), bl.version, nil
}

func (b *blobs) Version(ctx context.Context, key string) (string, error) {
	m, err := b.start(ctx, key)
	if err != nil {
		return "", err
	}
	defer b.c.e.blobs.mu.Unlock()
	bl, ok := b.live(m, key)
	if !ok {
		return "", broker.ErrNotFound
	}
	return bl.version, nil
}

func (b *blobs) Delete(ctx context.Context, key string) error {
	m, err := b.start(ctx, key)
	if err != nil {
		return err
	}
	defer b.c.e.blobs.mu.Unlock()
	delete(m, key)
	return nil
}
