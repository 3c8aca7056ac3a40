package preview

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
)

// manifest records the content of one version so the next deploy need not re-hash it.
type manifest struct {
	Files map[string]entry `json:"files"` // slash-separated path relative to the version root
}

// entry is one file of a version.
type entry struct {
	SHA256 string `json:"sha256"` // lowercase hex
	Size   int64  `json:"size"`
}

// readManifest loads the manifest at path; a missing one is an empty manifest.
func readManifest(path string) (manifest, error) {
	m := manifest{Files: map[string]entry{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return m, err
	}
	err = json.Unmarshal(b, &m)
	return m, err
}

// write stores m at path via a temporary file renamed into place.
func (m manifest) write(path string) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := path + stagingExt
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// byHash indexes m's paths by content hash, one path per hash.
func (m manifest) byHash() map[string]string {
	idx := make(map[string]string, len(m.Files))
	for p, e := range m.Files {
		idx[e.SHA256] = p
	}
	return idx
}
