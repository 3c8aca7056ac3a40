package natsjs

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
)

var tableName = regexp.MustCompile(`^[a-z0-9_]+$`)

// table opens the KV bucket wo_t_<name>.
func (a *adapter) table(ctx context.Context, name string) (broker.Table, error) {
	if !tableName.MatchString(name) {
		return nil, fmt.Errorf("natsjs: table name %q must match ^[a-z0-9_]+$", name)
	}
	kv, err := a.bucket(ctx, jetstream.KeyValueConfig{Bucket: "wo_t_" + name, History: 1, Replicas: a.cfg.Replicas,
		Storage: jetstream.FileStorage})
	if err != nil {
		return nil, err
	}
	return &table{kv: kv}, nil
}

type table struct{ kv jetstream.KeyValue }

var _ broker.Table = (*table)(nil)

func (t *table) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	e, err := t.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) || errors.Is(err, jetstream.ErrInvalidKey) {
		return nil, 0, broker.ErrNotFound
	}
	if err != nil {
		return nil, 0, ctxErr(ctx, fmt.Errorf("natsjs: get %s: %w", key, err))
	}
	return e.Value(), e.Revision(), nil
}

func (t *table) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, err := t.kv.Create(ctx, key, value)
	if errors.Is(err, jetstream.ErrKeyExists) || isWrongLastSeq(err) {
		return 0, broker.ErrExists
	}
	return rev, ctxErr(ctx, wrapKey("create", key, err))
}

func (t *table) Update(ctx context.Context, key string, value []byte, version uint64) (uint64, error) {
	rev, err := t.kv.Update(ctx, key, value, version)
	if isWrongLastSeq(err) {
		return 0, broker.ErrConflict
	}
	return rev, ctxErr(ctx, wrapKey("update", key, err))
}

func (t *table) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	rev, err := t.kv.Put(ctx, key, value)
	return rev, ctxErr(ctx, wrapKey("put", key, err))
}

func (t *table) Delete(ctx context.Context, key string) error {
	err := t.kv.Delete(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	return ctxErr(ctx, wrapKey("delete", key, err))
}

func (t *table) Keys(ctx context.Context) ([]string, error) {
	lister, err := t.kv.ListKeys(ctx)
	if err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("natsjs: list keys: %w", err))
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, ctx.Err()
}

func wrapKey(op, key string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("natsjs: %s %s: %w", op, key, err)
}
