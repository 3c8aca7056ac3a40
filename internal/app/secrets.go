package app

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The secrets serve generates on its first start live in <data>/secrets (mode 0700), one
// file each (mode 0600). Jobs run without access to the data directory, so the files are the
// secrets: a process on this machine that can read them is trusted.
const (
	// EngineCredsFile holds the embedded engine's credentials: {"user":"…","password":"…"}.
	EngineCredsFile = "nats.json"
	// APITokenFile holds the HTTP API and dashboard token: the token and a newline.
	APITokenFile = "api-token"
)

// SecretPath is the file of the secret name in the data directory data.
func SecretPath(data, name string) string { return filepath.Join(data, "secrets", name) }

// EngineCreds are the embedded engine's user and password.
type EngineCreds struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

// loadOrCreateEngineCreds returns the data directory's engine credentials, generating them on
// the first start.
func loadOrCreateEngineCreds(data string) (EngineCreds, error) {
	fresh, _ := json.Marshal(EngineCreds{User: "webordinary", Password: rand.Text()})
	raw, _, err := loadOrCreateSecret(SecretPath(data, EngineCredsFile), append(fresh, '\n'))
	if err != nil {
		return EngineCreds{}, err
	}
	return parseEngineCreds(SecretPath(data, EngineCredsFile), raw)
}

// ReadEngineCreds reads the data directory's engine credentials (a worker or CLI on serve's
// machine, or a copy of the file); ok is false when there is no file.
func ReadEngineCreds(data string) (c EngineCreds, ok bool, err error) {
	path := SecretPath(data, EngineCredsFile)
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return EngineCreds{}, false, nil
	}
	if err != nil {
		return EngineCreds{}, false, err
	}
	c, err = parseEngineCreds(path, raw)
	return c, err == nil, err
}

func parseEngineCreds(path string, raw []byte) (EngineCreds, error) {
	var c EngineCreds
	if err := json.Unmarshal(raw, &c); err != nil || c.User == "" || c.Password == "" {
		return EngineCreds{}, fmt.Errorf("%s: want {\"user\":…,\"password\":…} (delete it to generate new credentials)", path)
	}
	return c, nil
}

// loadOrCreateAPIToken returns the data directory's API token and whether this call created it.
func loadOrCreateAPIToken(data string) (token string, created bool, err error) {
	raw, created, err := loadOrCreateSecret(SecretPath(data, APITokenFile), []byte("wo_"+rand.Text()+"\n"))
	return strings.TrimSpace(string(raw)), created, err
}

// ReadAPIToken reads the data directory's API token; "" when there is none.
func ReadAPIToken(data string) (string, error) {
	raw, err := os.ReadFile(SecretPath(data, APITokenFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return strings.TrimSpace(string(raw)), err
}

// loadOrCreateSecret returns path's content, or writes fresh there and returns it. The write
// is atomic and exclusive (a temporary file linked into place), so two starts agree on one
// secret and a crash never leaves half a file.
func loadOrCreateSecret(path string, fresh []byte) (content []byte, created bool, err error) {
	if raw, err := os.ReadFile(path); err == nil {
		return raw, false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, false, err
	}
	err = linkNew(dir, path, fresh)
	if errors.Is(err, fs.ErrExist) {
		raw, err := os.ReadFile(path)
		return raw, false, err
	}
	return fresh, err == nil, err
}

// linkNew writes content to a temporary file in dir, syncs it and links it to path, which must
// not exist yet.
func linkNew(dir, path string, content []byte) error {
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(content); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
