package brokertest

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
)

func blobContracts() []contract {
	return []contract{
		{"PutGetVersionDelete", testBlobBasics},
		{"VersionChangesOnEveryPut", testBlobVersions},
		{"LargeValueRoundTrips", testBlobLarge},
		{"OverLimitIsTooLargeAndKeepsPrevious", testBlobTooLarge},
		{"StoresAreSeparate", testBlobStores},
		{"ConcurrentPutsLeaveOneWhole", testBlobConcurrent},
		{"MaxAgeEndsABlob", testBlobMaxAge},
	}
}

func openBlobs(t *testing.T, h Harness, name string) (*broker.Backend, broker.Blobs) {
	t.Helper()
	ctx, b := h.setup(t)
	if b.Blobs == nil {
		t.Fatal("expected Backend.Blobs to be set")
	}
	s, err := b.Blobs(ctx, name)
	if err != nil {
		t.Fatalf("open blob store %s: %v", name, err)
	}
	return b, s
}

func testBlobBasics(t *testing.T, h Harness) {
	_, s := openBlobs(t, h, "states")
	ctx := t.Context()
	if _, _, err := s.Get(ctx, "site.ann"); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("get of a missing key: expected ErrNotFound, got %v", err)
	}
	if _, err := s.Version(ctx, "site.ann"); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("version of a missing key: expected ErrNotFound, got %v", err)
	}
	v, err := s.Put(ctx, "site.ann", []byte("state 1"))
	if err != nil || v == "" {
		t.Fatalf("put: expected a version, got %q, %v", v, err)
	}
	got, gv, err := s.Get(ctx, "site.ann")
	if err != nil || string(got) != "state 1" || gv != v {
		t.Fatalf("get: expected %q version %q, got %q version %q, %v", "state 1", v, got, gv, err)
	}
	if vv, err := s.Version(ctx, "site.ann"); err != nil || vv != v {
		t.Fatalf("version: expected %q, got %q, %v", v, vv, err)
	}
	for range 2 { // idempotent
		if err := s.Delete(ctx, "site.ann"); err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
	if _, _, err := s.Get(ctx, "site.ann"); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("get after delete: expected ErrNotFound, got %v", err)
	}
	if err := s.Delete(ctx, "never.there"); err != nil {
		t.Fatalf("delete of a key never stored: %v", err)
	}
}

func testBlobVersions(t *testing.T, h Harness) {
	_, s := openBlobs(t, h, "states")
	ctx := t.Context()
	seen := map[string]bool{}
	for i := range 3 {
		v, err := s.Put(ctx, "site.ann", []byte("same value")) // same content: still a new version
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		if seen[v] {
			t.Fatalf("put %d returned version %q again", i, v)
		}
		seen[v] = true
	}
	if err := s.Delete(ctx, "site.ann"); err != nil {
		t.Fatal(err)
	}
	v, err := s.Put(ctx, "site.ann", []byte("same value"))
	if err != nil || seen[v] {
		t.Fatalf("put after delete: expected a version never seen, got %q, %v", v, err)
	}
}

func testBlobLarge(t *testing.T, h Harness) {
	_, s := openBlobs(t, h, "previews")
	ctx := t.Context()
	big := bytes.Repeat([]byte("0123456789abcdef"), 3<<20/16+7) // ~3 MiB, many chunks, odd size
	v, err := s.Put(ctx, "sha256/abc", big)
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	got, gv, err := s.Get(ctx, "sha256/abc")
	if err != nil || gv != v || !bytes.Equal(got, big) {
		t.Fatalf("get: expected the %d bytes back with version %q, got %d bytes, %q, %v", len(big), v, len(got), gv, err)
	}
}

func testBlobTooLarge(t *testing.T, h Harness) {
	_, s := openBlobs(t, h, "states")
	ctx := t.Context()
	v, err := s.Put(ctx, "site.ann", []byte("small"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "site.ann", make([]byte, broker.MaxBlobSize+1)); !errors.Is(err, broker.ErrTooLarge) {
		t.Fatalf("put over MaxBlobSize: expected ErrTooLarge, got %v", err)
	}
	if got, gv, err := s.Get(ctx, "site.ann"); err != nil || string(got) != "small" || gv != v {
		t.Fatalf("after a refused put: expected the previous value, got %q %q %v", got, gv, err)
	}
}

func testBlobStores(t *testing.T, h Harness) {
	b, s := openBlobs(t, h, "states")
	ctx := t.Context()
	other, err := b.Blobs(ctx, "previews")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "site.ann", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.Get(ctx, "site.ann"); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("another store: expected ErrNotFound, got %v", err)
	}
	again, err := b.Blobs(ctx, "states") // opening again sees the same values
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := again.Get(ctx, "site.ann"); err != nil || string(got) != "x" {
		t.Fatalf("reopened store: expected x, got %q, %v", got, err)
	}
	if _, err := b.Blobs(ctx, "Bad-Name"); err == nil {
		t.Fatal("expected a store name outside ^[a-z0-9_]+$ to be refused")
	}
	if _, err := s.Put(ctx, "../escape", []byte("x")); err == nil {
		t.Fatal("expected a key outside broker.BlobKey to be refused")
	}
}

func testBlobConcurrent(t *testing.T, h Harness) {
	_, s := openBlobs(t, h, "states")
	ctx := t.Context()
	values := [][]byte{bytes.Repeat([]byte("a"), 300<<10), bytes.Repeat([]byte("b"), 300<<10)}
	var wg sync.WaitGroup
	for _, v := range values {
		wg.Go(func() {
			if _, err := s.Put(ctx, "site.ann", v); err != nil {
				t.Errorf("put: %v", err)
			}
		})
	}
	wg.Wait()
	got, _, err := s.Get(ctx, "site.ann")
	if err != nil || !(bytes.Equal(got, values[0]) || bytes.Equal(got, values[1])) {
		t.Fatalf("after concurrent puts: expected one whole value, got %d bytes, %v", len(got), err)
	}
}

// testBlobMaxAge: a store opened with a max age serves a blob until that long after its
// Put and then says ErrNotFound (S3 dates objects to the second, hence 3 s); a Put after
// that starts a new life; a store without one keeps its blobs.
func testBlobMaxAge(t *testing.T, h Harness) {
	b, s := openBlobs(t, h, "states")
	ctx := t.Context()
	const maxAge = 3 * time.Second
	exp, err := b.Blobs(ctx, "pictures", broker.BlobMaxAge(maxAge))
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []broker.Blobs{s, exp} {
		if _, err := st.Put(ctx, "job1", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	put := time.Now()
	if got, _, err := exp.Get(ctx, "job1"); err != nil || string(got) != "x" {
		t.Fatalf("a blob just put in a store with a max age: %q, %v", got, err)
	}
	for {
		_, _, gerr := exp.Get(ctx, "job1")
		_, verr := exp.Version(ctx, "job1")
		if errors.Is(gerr, broker.ErrNotFound) && errors.Is(verr, broker.ErrNotFound) {
			if age := time.Since(put); age < maxAge-time.Second { // S3's second: a put at .9 is dated .0
				t.Fatalf("the blob ended %s after its put; max age %s", age, maxAge)
			}
			break
		}
		if time.Since(put) > maxAge+15*time.Second {
			t.Fatalf("%s after its put, the blob is still there (get %v, version %v); max age %s", time.Since(put), gerr, verr, maxAge)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got, _, err := s.Get(ctx, "job1"); err != nil || string(got) != "x" {
		t.Fatalf("a store without a max age lost its blob: %q, %v", got, err)
	}
	if _, err := exp.Put(ctx, "job1", []byte("y")); err != nil {
		t.Fatal(err)
	}
	if got, _, err := exp.Get(ctx, "job1"); err != nil || string(got) != "y" {
		t.Fatalf("a blob put again after it ended: %q, %v", got, err)
	}
}
