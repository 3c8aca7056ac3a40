package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/webordinary/webordinary/internal/broker"
)

type jobs struct{ kv jetstream.KeyValue }

var _ broker.Jobs = (*jobs)(nil)

func (j *jobs) Create(ctx context.Context, rec broker.JobRecord) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("natsjs: encode job record %s: %w", rec.Job.ID, err)
	}
	_, err = j.kv.Create(ctx, rec.Job.ID, data)
	if errors.Is(err, jetstream.ErrKeyExists) || isWrongLastSeq(err) {
		return broker.ErrExists
	}
	return ctxErr(ctx, wrap("create record for", rec.Job.ID, err))
}

func (j *jobs) Get(ctx context.Context, id string) (broker.JobRecord, error) {
	rec, _, err := j.get(ctx, id)
	return rec, err
}

func (j *jobs) get(ctx context.Context, id string) (broker.JobRecord, uint64, error) {
	e, err := j.kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) || errors.Is(err, jetstream.ErrInvalidKey) {
		return broker.JobRecord{}, 0, broker.ErrNotFound
	}
	if err != nil {
		return broker.JobRecord{}, 0, ctxErr(ctx, wrap("get record for", id, err))
	}
	var rec broker.JobRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return broker.JobRecord{}, 0, fmt.Errorf("natsjs: decode job record %s: %w", id, err)
	}
	return rec, e.Revision(), nil
}

func (j *jobs) Update(ctx context.Context, id string, fn func(*broker.JobRecord) error) (broker.JobRecord, error) {
	for {
		rec, rev, err := j.get(ctx, id)
		if err != nil {
			return rec, err
		}
		if err := fn(&rec); err != nil {
			return rec, err
		}
		data, err := json.Marshal(rec)
		if err != nil {
			return rec, fmt.Errorf("natsjs: encode job record %s: %w", id, err)
		}
		_, err = j.kv.Update(ctx, id, data, rev)
		if isWrongLastSeq(err) {
			continue
		}
		return rec, ctxErr(ctx, wrap("update record for", id, err))
	}
}

func (j *jobs) Recent(ctx context.Context, n int) ([]broker.JobRecord, error) {
	lister, err := j.kv.ListKeys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, ctxErr(ctx, fmt.Errorf("natsjs: list job records: %w", err))
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	slices.Reverse(keys)
	out := make([]broker.JobRecord, 0, min(n, len(keys)))
	for _, k := range keys[:min(n, len(keys))] {
		if rec, err := j.Get(ctx, k); err == nil {
			out = append(out, rec)
		}
	}
	return out, ctx.Err()
}

func (j *jobs) Wait(ctx context.Context, id string, until func(broker.JobRecord) bool) (broker.JobRecord, error) {
	w, err := j.kv.Watch(ctx, id)
	if err != nil {
		return broker.JobRecord{}, ctxErr(ctx, wrap("watch record for", id, err))
	}
	defer func() { _ = w.Stop() }()
	var last broker.JobRecord
	for {
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case e := <-w.Updates():
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			if err := json.Unmarshal(e.Value(), &last); err == nil && until(last) {
				return last, nil
			}
		}
	}
}
