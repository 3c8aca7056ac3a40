package agentstate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/tenant"
)

// BlobStore is the name of the engine's blob store that holds the archives.
const BlobStore = "states"

// marker is the file in a tenant's state root that holds the version its travelling parts
// were last saved as or restored from. Jobs cannot write it (they write agent/ and home/).
const marker = ".agent-state-version"

// Store saves and restores tenants' agent state in an engine's blob store. Safe for
// concurrent use across tenants; one tenant's state is handled by its lease holder only.
type Store struct {
	Blobs broker.Blobs
	// MaxBytes bounds an archive; a larger one is ErrTooLarge. Default DefaultMaxBytes.
	MaxBytes int
}

// Open opens the blob store of b's engine that holds agent states.
func Open(ctx context.Context, b *broker.Backend, maxBytes int) (*Store, error) {
	if b.Blobs == nil {
		return nil, errors.New("agentstate: the engine has no blob store")
	}
	blobs, err := b.Blobs(ctx, BlobStore)
	if err != nil {
		return nil, err
	}
	return &Store{Blobs: blobs, MaxBytes: maxBytes}, nil
}

// Key is where t's archive lives: "<project>.<user>".
func Key(t tenant.ID) string { return t.Subject() }

// Save archives root's travelling parts and stores them as t's state. Over MaxBytes, it
// returns ErrTooLarge and the previously stored state stays.
func (s *Store) Save(ctx context.Context, t tenant.ID, root string) (Stats, error) {
	data, st, err := Pack(root, s.maxBytes())
	if errors.Is(err, ErrTooLarge) {
		return st, fmt.Errorf("agentstate: %s's agent state (%d files, %d MiB read so far) is over the limit of %d MiB compressed: %w; "+
			"the previous state stays in the engine, the newest only on this machine (raise worker.state_max_bytes or trim %s)",
			t, st.Files, st.Unpacked>>20, s.maxBytes()>>20, err, root)
	}
	if err != nil {
		return st, fmt.Errorf("agentstate: pack %s: %w", t, err)
	}
	v, err := s.Blobs.Put(ctx, Key(t), data)
	if err != nil {
		return st, fmt.Errorf("agentstate: save %s: %w", t, err)
	}
	return st, writeMarker(root, v)
}

func (s *Store) maxBytes() int {
	if s.MaxBytes <= 0 {
		return DefaultMaxBytes
	}
	return min(s.MaxBytes, broker.MaxBlobSize)
}

// Restore replaces root's travelling parts with t's stored state when the local copy is
// missing or not the stored version; what stays local (caches, credentials) is kept. It
// reports whether it restored; with no stored state it leaves root alone.
func (s *Store) Restore(ctx context.Context, t tenant.ID, root string) (bool, Stats, error) {
	v, err := s.Blobs.Version(ctx, Key(t))
	if errors.Is(err, broker.ErrNotFound) {
		return false, Stats{}, nil
	}
	if err != nil {
		return false, Stats{}, fmt.Errorf("agentstate: %s: %w", t, err)
	}
	if local, _ := os.ReadFile(filepath.Join(root, marker)); string(local) == v {
		return false, Stats{}, nil
	}
	data, v, err := s.Blobs.Get(ctx, Key(t))
	if err != nil {
		return false, Stats{}, fmt.Errorf("agentstate: restore %s: %w", t, err)
	}
	st, err := replace(root, data)
	if err != nil {
		return false, st, fmt.Errorf("agentstate: restore %s: %w", t, err)
	}
	return true, st, writeMarker(root, v)
}

// replace unpacks data beside root's travelling parts, moves the local-only entries into
// the new tree, then swaps each part by rename.
func replace(root string, data []byte) (Stats, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return Stats{}, err
	}
	removeLeftovers(root)
	suffix := randomSuffix()
	fresh, old := filepath.Join(root, ".restore-"+suffix), filepath.Join(root, ".replaced-"+suffix)
	defer os.RemoveAll(fresh)
	defer os.RemoveAll(old)
	st, err := Unpack(data, fresh)
	if err != nil {
		return st, err
	}
	if err := os.Mkdir(old, 0o700); err != nil {
		return st, err
	}
	for _, top := range Travelling {
		if err := swap(root, fresh, old, top); err != nil {
			return st, err
		}
	}
	return st, nil
}

func swap(root, fresh, old, top string) error {
	cur, next := filepath.Join(root, top), filepath.Join(fresh, top)
	if err := os.MkdirAll(next, 0o755); err != nil {
		return err
	}
	if err := keepLocal(root, cur, fresh); err != nil {
		return err
	}
	if err := os.Rename(cur, filepath.Join(old, top)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.Rename(next, cur)
}

// keepLocal moves the entries of cur that never travel into the same place under fresh.
func keepLocal(root, cur, fresh string) error {
	return filepath.WalkDir(cur, func(abs string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(root, abs)
		if !Skipped(filepath.ToSlash(rel)) {
			return nil
		}
		dst := filepath.Join(fresh, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.Rename(abs, dst); err != nil {
			return err
		}
		if d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	})
}

// removeLeftovers deletes what a restore cut short by a crash left behind.
func removeLeftovers(root string) {
	for _, pattern := range []string{".restore-*", ".replaced-*"} {
		left, _ := filepath.Glob(filepath.Join(root, pattern))
		for _, p := range left {
			_ = os.RemoveAll(p)
		}
	}
}

func writeMarker(root, version string) error {
	tmp := filepath.Join(root, marker+".tmp")
	if err := os.WriteFile(tmp, []byte(version), 0o600); err != nil {
		return fmt.Errorf("agentstate: %w", err)
	}
	return os.Rename(tmp, filepath.Join(root, marker))
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(hex.EncodeToString(b[:]))
}
