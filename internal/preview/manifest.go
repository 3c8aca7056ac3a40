package preview

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"sync"
)

// manifest lists the files of one version. It is written once and never changed.
type manifest struct {
	Files map[string]entry `json:"files"` // by slash-separated path relative to the site root
}

// entry is one file of a version; its content is the blob named SHA256.
type entry struct {
	SHA256 string `json:"sha256"` // lowercase hex
	Size   int64  `json:"size"`
}

// readManifest loads and checks the manifest at path.
func readManifest(p string) (manifest, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return manifest{}, err
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return manifest{}, fmt.Errorf("manifest %s: %w", p, err)
	}
	return m, m.check(p)
}

// check rejects a manifest with a malformed path or a blob name that is not a hash.
func (m manifest) check(p string) error {
	for name, e := range m.Files {
		if !fs.ValidPath(name) || name == "." || !isHash(e.SHA256) {
			return fmt.Errorf("manifest %s: bad entry %q", p, name)
		}
	}
	return nil
}

// isHash reports whether s is 64 lowercase hex digits.
func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// write stores m at p via a temporary file renamed into place.
func (m manifest) write(p string) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := tmpName(p)
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// manifestCache keeps decoded manifests by path. An entry is used only while the file at
// that path is the same file (same inode, size and mtime), so a path reused after the tree
// was wiped is read afresh.
type manifestCache struct {
	mu  sync.Mutex
	max int
	m   map[string]cachedManifest
}

type cachedManifest struct {
	fi  os.FileInfo
	man manifest
}

func newManifestCache(max int) *manifestCache {
	return &manifestCache{max: max, m: map[string]cachedManifest{}}
}

// load returns the manifest at p, from the cache when the file has not changed.
func (c *manifestCache) load(p string) (manifest, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return manifest{}, err
	}
	c.mu.Lock()
	e, ok := c.m[p]
	c.mu.Unlock()
	if ok && sameFile(e.fi, fi) {
		return e.man, nil
	}
	man, err := readManifest(p)
	if err != nil {
		return manifest{}, err
	}
	c.put(p, fi, man)
	return man, nil
}

// put caches man as the content of p, evicting an arbitrary entry when full.
func (c *manifestCache) put(p string, fi os.FileInfo, man manifest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.m {
		if len(c.m) < c.max {
			break
		}
		delete(c.m, k)
	}
	c.m[p] = cachedManifest{fi: fi, man: man}
}

func sameFile(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
