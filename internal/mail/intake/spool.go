package intake

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/durable"
)

// spool keeps accepted messages as <id>.eml plus <id>.json (the envelope) in a directory.
// Each pair is written to temporary names, fsync'd, and renamed into place, and the directory
// is fsync'd, before the SMTP server answers 250. ids sort by arrival.
type spool struct {
	dir string
	mu  sync.Mutex
	seq uint64
}

func openSpool(dir string) (*spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("intake: spool %s: %w", dir, err)
	}
	if err := durable.RemoveTemps(dir); err != nil {
		return nil, fmt.Errorf("intake: spool %s: %w", dir, err)
	}
	return &spool{dir: dir}, nil
}

func (s *spool) nextID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	var r [4]byte
	_, _ = rand.Read(r[:])
	return fmt.Sprintf("%019d-%06d-%s", time.Now().UnixNano(), s.seq%1000000, hex.EncodeToString(r[:]))
}

func (s *spool) write(env Envelope, raw []byte) (string, error) {
	id := s.nextID()
	meta, _ := json.Marshal(env)
	if err := durable.Write(s.dir, id+".json", meta); err != nil {
		return "", err
	}
	if err := durable.Write(s.dir, id+".eml", raw); err != nil {
		return "", err
	}
	return id, durable.SyncDir(s.dir) // one directory fsync makes both renames durable
}

// pending lists spooled messages, oldest first. A message whose envelope was written but
// whose body was not (a crash in between; never answered 250) is not listed.
func (s *spool) pending() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".eml"); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

func (s *spool) read(id string) (Envelope, []byte, error) {
	var env Envelope
	meta, err := os.ReadFile(filepath.Join(s.dir, id+".json"))
	if err != nil {
		return env, nil, err
	}
	if err := json.Unmarshal(meta, &env); err != nil {
		return env, nil, fmt.Errorf("intake: envelope %s: %w", id, err)
	}
	raw, err := os.ReadFile(filepath.Join(s.dir, id+".eml"))
	return env, raw, err
}

// done removes a handled message: the body first, so a crash in between leaves no listed entry.
func (s *spool) done(id string) error {
	err := os.Remove(filepath.Join(s.dir, id+".eml"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	err = os.Remove(filepath.Join(s.dir, id+".json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
