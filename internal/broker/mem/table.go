package mem

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"sync"

	"github.com/webordinary/webordinary/internal/broker"
)

var (
	tableName = regexp.MustCompile(`^[a-z0-9_]+$`)
	// tableKey is what a NATS KV key may be, so that keys working here work there too.
	tableKey = regexp.MustCompile(`^[-/_=a-zA-Z0-9]+(\.[-/_=a-zA-Z0-9]+)*$`)
)

// tableStore holds the tables by name; every client sees the same ones.
type tableStore struct {
	mu     sync.Mutex
	tables map[string]*tableData
}

// tableData is one table: values with a per-table revision as their version.
type tableData struct {
	mu   sync.Mutex
	rev  uint64
	rows map[string]row
}

type row struct {
	value []byte
	rev   uint64
}

func newTableStore() *tableStore { return &tableStore{tables: map[string]*tableData{}} }

func (c *conn) table(ctx context.Context, name string) (broker.Table, error) {
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	if !tableName.MatchString(name) {
		return nil, fmt.Errorf("mem: table name %q must match ^[a-z0-9_]+$", name)
	}
	s := c.e.tables
	s.mu.Lock()
	defer s.mu.Unlock()
	td := s.tables[name]
	if td == nil {
		td = &tableData{rows: map[string]row{}}
		s.tables[name] = td
	}
	return &table{c: c, name: name, d: td}, nil
}

// table is one client's handle on a table.
type table struct {
	c    *conn
	name string
	d    *tableData
}

var _ broker.Table = (*table)(nil)

// begin checks the call and the key, and locks the table; the caller unlocks.
func (t *table) begin(ctx context.Context, op, key string) error {
	if err := t.c.check(ctx); err != nil {
		return err
	}
	if !tableKey.MatchString(key) {
		return fmt.Errorf("mem: %s %q in table %s: invalid key (letters, digits, - / _ = and inner dots)", op, key, t.name)
	}
	t.d.mu.Lock()
	return nil
}

// write stores value under key. Called with the table locked.
func (t *table) write(key string, value []byte) uint64 {
	t.d.rev++
	t.d.rows[key] = row{value: bytes.Clone(value), rev: t.d.rev}
	return t.d.rev
}

func (t *table) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	if err := t.c.check(ctx); err != nil {
		return nil, 0, err
	}
	if !tableKey.MatchString(key) {
		return nil, 0, broker.ErrNotFound // as natsjs: no such key can exist
	}
	t.d.mu.Lock()
	defer t.d.mu.Unlock()
	r, ok := t.d.rows[key]
	if !ok {
		return nil, 0, broker.ErrNotFound
	}
	return bytes.Clone(r.value), r.rev, nil
}

func (t *table) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	if err := t.begin(ctx, "create", key); err != nil {
		return 0, err
	}
	defer t.d.mu.Unlock()
	if _, ok := t.d.rows[key]; ok {
		return 0, broker.ErrExists
	}
	return t.write(key, value), nil
}

// Update on a missing key is a conflict, as on NATS (the version cannot match).
func (t *table) Update(ctx context.Context, key string, value []byte, version uint64) (uint64, error) {
	if err := t.begin(ctx, "update", key); err != nil {
		return 0, err
	}
	defer t.d.mu.Unlock()
	if r, ok := t.d.rows[key]; !ok || r.rev != version {
		return 0, broker.ErrConflict
	}
	return t.write(key, value), nil
}

func (t *table) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	if err := t.begin(ctx, "put", key); err != nil {
		return 0, err
	}
	defer t.d.mu.Unlock()
	return t.write(key, value), nil
}

func (t *table) Delete(ctx context.Context, key string) error {
	if err := t.begin(ctx, "delete", key); err != nil {
		return err
	}
	defer t.d.mu.Unlock()
	delete(t.d.rows, key)
	return nil
}

func (t *table) Keys(ctx context.Context) ([]string, error) {
	if err := t.c.check(ctx); err != nil {
		return nil, err
	}
	t.d.mu.Lock()
	keys := make([]string, 0, len(t.d.rows))
	for k := range t.d.rows {
		keys = append(keys, k)
	}
	t.d.mu.Unlock()
	slices.Sort(keys)
	return keys, nil
}
