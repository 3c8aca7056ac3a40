package shots

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestPruneKeepsAJobsPicturesForKeep: Prune removes the pictures of jobs last written more
// than Keep ago, taken here or fetched, and a fetch a killed process left; younger ones, a
// job's pictures whose report was rewritten lately, the cache's young pictures and an old
// directory holding anything but pictures stay.
func TestPruneKeepsAJobsPicturesForKeep(t *testing.T) {
	t.Parallel()
	s := Store{Dir: t.TempDir()}
	now := time.Now()
	old, young := now.Add(-Keep-time.Hour), now.Add(-Keep+time.Hour)
	mk := func(rel string, dirAt, reportAt time.Time) string {
		p := filepath.Join(s.Dir, rel)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if !reportAt.IsZero() {
			r := filepath.Join(p, reportName)
			if err := os.WriteFile(r, []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(r, reportAt, reportAt); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(p, dirAt, dirAt); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gone := []string{
		mk("job-old", old, old),
		mk(filepath.Join(remoteDirName, "job-old-fetched"), old, old),
		mk(filepath.Join(remoteDirName, ".fetch-123"), now.Add(-2*time.Hour), time.Time{}),
	}
	kept := []string{
		mk("job-young", young, young),
		mk("job-report-rewritten", old, young),
		mk(filepath.Join(remoteDirName, "job-young-fetched"), young, young),
		mk(filepath.Join(remoteDirName, ".fetch-456"), now.Add(-time.Minute), time.Time{}),
	}
	// Not a job's: --shots given a directory shared with other things (say the data
	// directory, whose jetstream/ changes rarely) loses nothing of theirs.
	other := mk("jetstream", old, time.Time{})
	if err := os.WriteFile(filepath.Join(other, "meta.inf"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(other, old, old); err != nil {
		t.Fatal(err)
	}
	kept = append(kept, other)
	cached := filepath.Join(s.Dir, cacheDir, "k.png")
	if err := os.MkdirAll(filepath.Dir(cached), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cached, []byte("png"), 0o644); err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	s.Prune(ended, now) // shutting down: nothing removed
	for _, p := range gone {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s was pruned after the context ended: %v", p, err)
		}
	}
	s.Prune(t.Context(), now)
	for _, p := range gone {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s was kept (%v); want it pruned", p, err)
		}
	}
	for _, p := range append(kept, cached) {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was pruned: %v", p, err)
		}
	}
}
