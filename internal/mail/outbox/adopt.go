package outbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/durable"
)

// adoptTimeout bounds moving a spool left on disk into the engine at Open.
const adoptTimeout = 2 * time.Minute

// adopt moves what a spool in dir holds (left by a serve from before the engine kept the
// outbox) into the engine: first its memory of deliveries, so a reply it sent is not sent
// again, then its queued messages, each removed from the disk once the engine holds it. A
// stop in between leaves a record on disk that the next adopt finds queued in the engine
// already and removes. Parked messages stay in dir's failed/.
func adopt(ctx context.Context, keep *engineStore, dir string, now time.Time, log *slog.Logger) error {
	d := diskStore{spool: spool{dir}, log: log}
	if _, err := os.Stat(d.path(queueDir)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := adoptSent(ctx, keep, d, now); err != nil {
		return err
	}
	queued, _, err := d.load(ctx)
	if err != nil {
		return err
	}
	for key, m := range queued {
		_, msg, err := readRecord(filepath.Join(d.path(queueDir), key+msgExt))
		if err != nil {
			return err
		}
		if _, err := keep.add(ctx, key, m, msg); err != nil {
			return err
		}
		if err := durable.Remove(d.path(queueDir), key+msgExt); err != nil {
			return err
		}
		log.InfoContext(ctx, "outbox: a reply queued on disk moved into the engine", slog.String("message_id", m.MessageID))
	}
	return nil
}

// adoptSent copies the deliveries d remembers (within sentMemory) the engine does not.
func adoptSent(ctx context.Context, keep *engineStore, d diskStore, now time.Time) error {
	entries, err := os.ReadDir(d.path(sentDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	for _, e := range entries {
		key := e.Name()
		if e.IsDir() || strings.HasPrefix(key, durable.TempPrefix) {
			continue
		}
		at, ok := d.sentAt(key)
		if !ok || now.Sub(at) > sentMemory {
			continue
		}
		if _, known, err := keep.sentAt(ctx, key); err != nil {
			return err
		} else if known {
			continue
		}
		if _, err := keep.e.Sent.Put(ctx, key, []byte(at.UTC().Format(time.RFC3339Nano))); err != nil {
			return fmt.Errorf("remember a delivery: %w", err)
		}
	}
	return nil
}
