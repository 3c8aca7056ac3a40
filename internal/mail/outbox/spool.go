package outbox

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/durable"
)

// The spool directory holds:
//
//	queue/<key>.msg   messages waiting to be sent (first line JSON meta, then the message)
//	failed/<key>.msg  parked messages, same format, with the error in the meta
//	sent/<key>        when a message was delivered (RFC 3339), kept for sentMemory
//
// where key is a digest of the Message-ID.
const (
	queueDir  = "queue"
	failedDir = "failed"
	sentDir   = "sent"
	msgExt    = ".msg"
	// corruptExt names, in failed/, a queued record load could not read.
	corruptExt = ".corrupt"
)

// sentMemory is how long a delivered Message-ID is remembered to make Enqueue idempotent.
const sentMemory = 24 * time.Hour

// meta is the spool record of one message, without the message itself.
type meta struct {
	MessageID string    `json:"message_id"`
	From      string    `json:"from"`
	To        []string  `json:"to"`
	Enqueued  time.Time `json:"enqueued"`
	Attempts  int       `json:"attempts"`
	NextAt    time.Time `json:"next_at"`
	LastError string    `json:"last_error,omitempty"`
}

// spoolKey names a message's spool files after a digest of its Message-ID.
func spoolKey(messageID string) string {
	sum := sha256.Sum256([]byte(messageID))
	return hex.EncodeToString(sum[:16])
}

// encodeRecord is the spool file content: the meta as one JSON line, then the message.
func encodeRecord(m meta, msg []byte) ([]byte, error) {
	line, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append(append(line, '\n'), msg...), nil
}

// readRecord reads a spool file.
func readRecord(path string) (meta, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return meta{}, nil, err
	}
	line, msg, ok := bytes.Cut(data, []byte("\n"))
	if !ok {
		return meta{}, nil, errors.New("spool record has no message")
	}
	var m meta
	if err := json.Unmarshal(line, &m); err != nil {
		return meta{}, nil, fmt.Errorf("spool record meta: %w", err)
	}
	return m, msg, nil
}

// readMeta reads only the meta line of a spool file.
func readMeta(path string) (meta, error) {
	f, err := os.Open(path)
	if err != nil {
		return meta{}, err
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadBytes('\n')
	if err != nil {
		return meta{}, fmt.Errorf("spool record meta: %w", err)
	}
	var m meta
	if err := json.Unmarshal(line, &m); err != nil {
		return meta{}, fmt.Errorf("spool record meta: %w", err)
	}
	return m, nil
}

// spool is the on-disk state of an outbox.
type spool struct{ dir string }

func (s spool) path(sub string) string { return filepath.Join(s.dir, sub) }

// init creates the subdirectories and removes temporary files a crash left behind.
func (s spool) init() error {
	for _, sub := range []string{queueDir, failedDir, sentDir} {
		if err := os.MkdirAll(s.path(sub), 0o700); err != nil {
			return err
		}
		if err := durable.RemoveTemps(s.path(sub)); err != nil {
			return err
		}
	}
	return nil
}

// write stores a record in sub (queue or failed), durably.
func (s spool) write(sub, key string, m meta, msg []byte) error {
	data, err := encodeRecord(m, msg)
	if err != nil {
		return err
	}
	return durable.WriteFile(s.path(sub), key+msgExt, data)
}

// load reads the meta of every queued message. Records it cannot read are moved to
// failed/<key>.corrupt and returned as bad, so one damaged file does not stop the outbox.
func (s spool) load() (queued map[string]meta, bad []string, err error) {
	keys, err := s.list(queueDir)
	if err != nil {
		return nil, nil, err
	}
	queued = make(map[string]meta, len(keys))
	for _, key := range keys {
		m, err := readMeta(filepath.Join(s.path(queueDir), key+msgExt))
		if err == nil {
			queued[key] = m
			continue
		}
		bad = append(bad, key)
		if err := s.quarantine(key); err != nil {
			return nil, nil, err
		}
	}
	return queued, bad, nil
}

// quarantine moves an unreadable queue record aside.
func (s spool) quarantine(key string) error {
	from := filepath.Join(s.path(queueDir), key+msgExt)
	if err := os.Rename(from, filepath.Join(s.path(failedDir), key+corruptExt)); err != nil {
		return err
	}
	return durable.SyncDir(s.path(queueDir))
}

// list returns the keys of the records in sub.
func (s spool) list(sub string) ([]string, error) {
	entries, err := os.ReadDir(s.path(sub))
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, e := range entries {
		if key, ok := strings.CutSuffix(e.Name(), msgExt); ok && !e.IsDir() {
			keys = append(keys, key)
		}
	}
	return keys, nil
}

// markSent records that key was delivered at t.
func (s spool) markSent(key string, t time.Time) error {
	return durable.WriteFile(s.path(sentDir), key, []byte(t.UTC().Format(time.RFC3339Nano)))
}

// sentAt returns when key was delivered, if it is recorded.
func (s spool) sentAt(key string) (time.Time, bool) {
	data, err := os.ReadFile(filepath.Join(s.path(sentDir), key))
	if err != nil {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(data)))
	return t, err == nil
}

// pruneSent forgets deliveries older than sentMemory (and unreadable records).
func (s spool) pruneSent(now time.Time) error {
	entries, err := os.ReadDir(s.path(sentDir))
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), durable.TempPrefix) {
			continue
		}
		if t, ok := s.sentAt(e.Name()); !ok || now.Sub(t) > sentMemory {
			if err := os.Remove(filepath.Join(s.path(sentDir), e.Name())); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
	}
	return nil
}

// exists reports whether sub/name exists.
func (s spool) exists(sub, name string) bool {
	_, err := os.Stat(filepath.Join(s.path(sub), name))
	return err == nil
}

// countFailed counts the parked and quarantined messages.
func (s spool) countFailed() (int, error) {
	entries, err := os.ReadDir(s.path(failedDir))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() && !strings.HasPrefix(e.Name(), durable.TempPrefix) {
			n++
		}
	}
	return n, nil
}
