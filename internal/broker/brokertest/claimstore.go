package brokertest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

func claimStoreContracts() []contract {
	return []contract{
		{"StaleWritesAreRefused", testClaimStoreConditional},
		{"WatchFeedsRecordsThenChanges", testClaimStoreWatch},
	}
}

// claimRecords returns the broker.ClaimRecords under b's Claims, or skips the test when its
// Claims are not broker.SharedClaims over a store.
func claimRecords(t *testing.T, b *broker.Backend) broker.ClaimRecords {
	t.Helper()
	s, ok := b.Claims.(interface{ Records() broker.ClaimRecords })
	if !ok {
		t.Skip("the backend's Claims are not broker.SharedClaims over a claim store")
	}
	return s.Records()
}

// testClaimStoreConditional: every write names the version its writer read, and a write over
// any other version is refused with broker.ErrConflict, whatever came between (a write, a
// removal, a create racing a create).
func testClaimStoreConditional(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	s := claimRecords(t, b)
	e, err := s.Get(ctx, tenantA)
	fatalIfErr(t, err, "get a record never written")
	if e.Version != 0 || e.Value != nil {
		t.Fatalf("expected no record (version 0, no value), got version %d, value %q", e.Version, e.Value)
	}
	v1, err := s.Put(ctx, tenantA, []byte(`{"n":1}`), 0)
	fatalIfErr(t, err, "create a record")
	_, err = s.Put(ctx, tenantA, []byte(`{"n":"again"}`), 0)
	expectErr(t, err, broker.ErrConflict, "create a record that exists")
	v2, err := s.Put(ctx, tenantA, []byte(`{"n":2}`), v1)
	fatalIfErr(t, err, "update a record at its version")
	_, err = s.Put(ctx, tenantA, []byte(`{"n":"stale"}`), v1)
	expectErr(t, err, broker.ErrConflict, "update a record over a stale version")
	expectErr(t, s.Delete(ctx, tenantA, v1), broker.ErrConflict, "remove a record at a stale version")
	expectStored(t, ctx, s, tenantA, `{"n":2}`, v2)
	fatalIfErr(t, s.Delete(ctx, tenantA, v2), "remove a record at its version")
	expectErr(t, s.Delete(ctx, tenantA, v2), broker.ErrConflict, "remove a record twice")
	_, err = s.Put(ctx, tenantA, []byte(`{"n":"stale"}`), v2)
	expectErr(t, err, broker.ErrConflict, "update a removed record")
	gone, err := s.Get(ctx, tenantA)
	fatalIfErr(t, err, "get a removed record")
	if gone.Value != nil || gone.Version == v2 {
		t.Fatalf("expected a removed record (no value, a new version or 0), got version %d (was %d), value %q", gone.Version, v2, gone.Value)
	}
	v3, err := s.Put(ctx, tenantA, []byte(`{"n":3}`), gone.Version)
	fatalIfErr(t, err, "write a removed record again at the version read")
	expectStored(t, ctx, s, tenantA, `{"n":3}`, v3)
}

func expectStored(t *testing.T, ctx context.Context, s broker.ClaimRecords, tn tenant.ID, value string, version uint64) {
	t.Helper()
	e, err := s.Get(ctx, tn)
	fatalIfErr(t, err, "get "+tn.String())
	if string(e.Value) != value || e.Version != version {
		t.Fatalf("expected %s at version %d, got %q at %d", value, version, e.Value, e.Version)
	}
}

// testClaimStoreWatch: a watch feeds the records the store holds, says it is ready once it
// did, then feeds every write and removal at the versions they returned.
func testClaimStoreWatch(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	s, ok := claimRecords(t, b).(broker.ClaimStore)
	if !ok {
		t.Skip("the backend's claim store has no watch (it rings bells)")
	}
	va, err := s.Put(ctx, tenantA, []byte(`{"n":"a"}`), 0)
	fatalIfErr(t, err, "create a record")
	vb, err := s.Put(ctx, tenantB, []byte(`{"n":"b"}`), 0)
	fatalIfErr(t, err, "create a record")
	fatalIfErr(t, s.Delete(ctx, tenantB, vb), "remove a record")
	f := newFeed()
	stop, err := s.Watch(f)
	fatalIfErr(t, err, "watch the store")
	t.Cleanup(stop)
	select {
	case <-f.ready:
	case <-withTimeout(t, ctx, deliverWithin).Done():
		t.Fatal("the watch never said it was ready")
	}
	if err := f.holds(tenantA, `{"n":"a"}`, va); err != nil {
		t.Fatalf("once ready: %v", err)
	}
	if err := f.holds(tenantB, "", 0); err != nil {
		t.Fatalf("once ready: %v", err)
	}
	vc, err := s.Put(ctx, tenantC, []byte(`{"n":"c"}`), 0)
	fatalIfErr(t, err, "create a record while watched")
	fatalIfErr(t, s.Delete(ctx, tenantA, va), "remove a record while watched")
	eventually(t, deliverWithin, func() error { return f.holds(tenantC, `{"n":"c"}`, vc) })
	eventually(t, deliverWithin, func() error { return f.holds(tenantA, "", 0) })
}

// feed records what a watch fed: the latest version of each tenant.
type feed struct {
	ready     chan struct{}
	readyOnce sync.Once
	mu        sync.Mutex
	got       map[tenant.ID]broker.ClaimEntry
}

var _ broker.ClaimFeed = (*feed)(nil)

func newFeed() *feed {
	return &feed{ready: make(chan struct{}), got: map[tenant.ID]broker.ClaimEntry{}}
}

func (f *feed) Apply(e broker.ClaimEntry) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur, ok := f.got[e.Tenant]; !ok || e.Version > cur.Version {
		f.got[e.Tenant] = broker.ClaimEntry{Tenant: e.Tenant, Value: bytes.Clone(e.Value), Version: e.Version}
	}
}

func (f *feed) Ready() { f.readyOnce.Do(func() { close(f.ready) }) }

func (f *feed) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.got)
}

// holds checks that the feed has tn at value and version; value "" asks for a removal (fed as
// a nil value, or never fed) and version 0 for any version.
func (f *feed) holds(tn tenant.ID, value string, version uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.got[tn]
	switch {
	case value == "" && (!ok || e.Value == nil):
		return nil
	case !ok:
		return fmt.Errorf("expected %s at version %d fed, got nothing", tn, version)
	case string(e.Value) != value || (version != 0 && e.Version != version):
		return fmt.Errorf("expected %s at version %d fed for %s, got %q at %d", value, version, tn, e.Value, e.Version)
	}
	return nil
}
