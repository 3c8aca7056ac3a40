package main

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// sessionFile is a session as stored in $CLAUDE_CONFIG_DIR/fakeclaude/sessions/<id>.json.
type sessionFile struct {
	ID   string      `json:"id"`
	Runs []runRecord `json:"runs"`
}

// runRecord is one run of a session: what fakeclaude was asked.
type runRecord struct {
	Prompt       string `json:"prompt"`
	SystemPrompt string `json:"system_prompt,omitempty"`
	Model        string `json:"model,omitempty"`
	Dir          string `json:"dir"`
}

// record adds a run and returns its turn number (1 for the first run of the session).
func (s *sessionFile) record(r runRecord) int {
	s.Runs = append(s.Runs, r)
	return len(s.Runs)
}

// resumed reports whether the session had runs before this one.
func (s *sessionFile) resumed() bool { return len(s.Runs) > 1 }

type sessionStore struct{ dir string }

func (st sessionStore) path(id string) string {
	return filepath.Join(st.dir, "fakeclaude", "sessions", id+".json")
}

// open creates the session opts names (or a new one), or loads the one it resumes.
func (st sessionStore) open(opts options) (*sessionFile, error) {
	if opts.resume != "" {
		return st.load(opts.resume)
	}
	id := opts.sessionID
	if id == "" {
		id = newUUID()
	}
	return st.create(id)
}

// create claims id; it fails when the session exists.
func (st sessionStore) create(id string) (*sessionFile, error) {
	p := st.path(id)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("Session ID %s is already in use.", id)
	}
	if err != nil {
		return nil, err
	}
	s := &sessionFile{ID: id}
	return s, errors.Join(json.NewEncoder(f).Encode(s), f.Close())
}

func (st sessionStore) load(id string) (*sessionFile, error) {
	b, err := os.ReadFile(st.path(filepath.Base(id)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("No conversation found with session ID: %s", id)
	}
	if err != nil {
		return nil, err
	}
	var s sessionFile
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	return &s, nil
}

// save writes s atomically.
func (st sessionStore) save(s *sessionFile) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := st.path(s.ID) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, st.path(s.ID))
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
