package brokertest

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/webordinary/webordinary/internal/broker"
)

func tableContracts() []contract {
	return []contract{
		{"CreateGetPutDelete", testTableBasics},
		{"UpdateIsCompareAndSet", testTableUpdate},
		{"KeysAreSortedAndPerTable", testTableKeys},
	}
}

func testTableBasics(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	tb, err := b.Table(ctx, "projects")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.Get(ctx, "site"); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("get of a missing key: expected ErrNotFound, got %v", err)
	}
	if _, err := tb.Create(ctx, "site", []byte("v1")); err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := tb.Create(ctx, "site", []byte("v2")); !errors.Is(err, broker.ErrExists) {
		t.Fatalf("second create: expected ErrExists, got %v", err)
	}
	if _, err := tb.Put(ctx, "site", []byte("v3")); err != nil {
		t.Fatalf("put: %v", err)
	}
	if v, _, err := tb.Get(ctx, "site"); err != nil || string(v) != "v3" {
		t.Fatalf("get after put: expected v3, got %q, %v", v, err)
	}
	for range 2 { // idempotent
		if err := tb.Delete(ctx, "site"); err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
	if _, _, err := tb.Get(ctx, "site"); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("get after delete: expected ErrNotFound, got %v", err)
	}
	if _, err := tb.Create(ctx, "site", []byte("again")); err != nil {
		t.Fatalf("create after delete: %v", err)
	}
}

func testTableUpdate(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	tb, err := b.Table(ctx, "threads")
	if err != nil {
		t.Fatal(err)
	}
	v0, err := tb.Create(ctx, "t1", []byte("0"))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wins := make(chan int, 10)
	for i := range 10 {
		wg.Go(func() {
			if _, err := tb.Update(ctx, "t1", []byte{byte('a' + i)}, v0); err == nil {
				wins <- i
			} else if !errors.Is(err, broker.ErrConflict) {
				t.Errorf("update: expected nil or ErrConflict, got %v", err)
			}
		})
	}
	wg.Wait()
	close(wins)
	if n := len(wins); n != 1 {
		t.Fatalf("expected exactly one of 10 updates on the same version to win, got %d", n)
	}
}

func testTableKeys(t *testing.T, h Harness) {
	ctx, b := h.setup(t)
	one, err := b.Table(ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	two, err := b.Table(ctx, "two")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"c", "a", "b"} {
		if _, err := one.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := two.Put(ctx, "z", []byte("z")); err != nil {
		t.Fatal(err)
	}
	keys, err := one.Keys(ctx)
	if err != nil || !slices.Equal(keys, []string{"a", "b", "c"}) {
		t.Fatalf("keys of table one: expected [a b c], got %v, %v", keys, err)
	}
	if _, err := b.Table(ctx, "Bad-Name"); err == nil {
		t.Fatal("expected an invalid table name to be refused")
	}
}
