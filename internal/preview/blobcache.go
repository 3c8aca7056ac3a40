package preview

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
)

// DefaultCacheMax bounds a directory of preview blobs read from the engine: 1 GiB.
const DefaultCacheMax = 1 << 30

// blobCache is a directory of blobs named by hash, filled from the engine on first use and
// bounded: once it holds more than max bytes, the blobs used least recently go until it holds
// three quarters of max. Content-addressed, so never stale, and any number of processes may
// share the directory: each counts what it adds (the caches of one process on one directory,
// serve's preview server and its workers', share the count) and, when its count passes max
// or its last listing is a minute old, lists the directory and evicts by the later of a
// file's modification time (a hit an hour after the last one sets it) and its own last use.
// Several processes adding at once can overshoot by what they add in a minute. A blob
// another process evicted is fetched again on its next use.
type blobCache struct {
	dir   string
	blobs broker.Blobs
	max   int64
	*dirCount
}

// dirCount is a process's count of one cache directory.
type dirCount struct {
	mu       sync.Mutex
	used     map[string]time.Time // this process's last use, by name
	size     int64                // bytes in the directory, as of the last listing plus what this process added since
	listed   time.Time            // the last listing
	evicting bool
}

// dirCounts are this process's counts, by absolute directory.
var dirCounts = struct {
	sync.Mutex
	m map[string]*dirCount
}{m: map[string]*dirCount{}}

func countOf(dir string) *dirCount {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	dirCounts.Lock()
	defer dirCounts.Unlock()
	if dirCounts.m[dir] == nil {
		dirCounts.m[dir] = &dirCount{used: map[string]time.Time{}}
	}
	return dirCounts.m[dir]
}

func newBlobCache(dir string, blobs broker.Blobs, max int64) (*blobCache, error) {
	if dir == "" {
		return nil, errors.New("preview engine: a cache directory is required")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("preview engine: %w", err)
	}
	c := &blobCache{dir: dir, blobs: blobs, max: cmp.Or(max, DefaultCacheMax), dirCount: countOf(dir)}
	c.maybeEvict() // counts what an earlier run left (unless another cache here just did), and trims it if over this bound
	return c, nil
}

// fetchTimeout bounds fetching one blob into the cache.
const fetchTimeout = time.Minute

// Open opens the blob named by its hash, fetching it from the engine when not cached. The
// content is checked against its name before it enters the cache.
func (c *blobCache) Open(name string) (*os.File, error) {
	if !isHash(name) {
		return nil, fmt.Errorf("blob name %q is not a hash", name)
	}
	p := filepath.Join(c.dir, name)
	if f, err := os.Open(p); err == nil {
		now := time.Now()
		c.mu.Lock()
		c.used[name] = now
		c.mu.Unlock()
		if fi, err := f.Stat(); err == nil && now.Sub(fi.ModTime()) > time.Hour {
			_ = os.Chtimes(p, time.Time{}, now) // recency other processes (and a restart) see
		}
		return f, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
	defer cancel()
	data, _, err := c.blobs.Get(ctx, "sha256/"+name)
	if err != nil {
		return nil, err
	}
	if h := sha256.Sum256(data); hex.EncodeToString(h[:]) != name {
		return nil, fmt.Errorf("blob %s: the engine returned other content", name)
	}
	// Written and kept open under a temporary name, then renamed: the handle reads the blob
	// even if an eviction (here or in another process) removes it a moment later.
	tmp := tmpName(p)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	_, err = f.Write(data)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	c.mu.Lock()
	c.used[name] = time.Now()
	c.size += int64(len(data))
	c.mu.Unlock()
	c.maybeEvict()
	return f, nil
}

// maybeEvict evicts when the count is over max or the last listing is a minute old, unless
// an eviction is under way.
func (c *blobCache) maybeEvict() {
	c.mu.Lock()
	if c.evicting || c.size <= c.max && time.Since(c.listed) <= time.Minute {
		c.mu.Unlock()
		return
	}
	c.evicting = true
	before, used := c.size, maps.Clone(c.used)
	c.mu.Unlock()
	c.evict(before, used)
}

// evict lists the directory, removes the least recently used blobs until it holds at most
// three quarters of max (never the most recent one), and recounts. Temporary files of fetches
// that never finished (a process killed mid-write) go once they are older than a fetch may
// take. before and used are the count and last uses when it began; the caller has set
// c.evicting.
func (c *blobCache) evict(before int64, used map[string]time.Time) {
	type file struct {
		name string
		size int64
		at   time.Time
	}
	var files []file
	var total int64
	entries, _ := os.ReadDir(c.dir) // unreadable: nothing to count or remove
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		if strings.HasSuffix(e.Name(), tmpExt) {
			if time.Since(info.ModTime()) > 2*fetchTimeout {
				_ = os.Remove(filepath.Join(c.dir, e.Name()))
			}
			continue
		}
		at := info.ModTime()
		if u := used[e.Name()]; u.After(at) {
			at = u
		}
		files = append(files, file{e.Name(), info.Size(), at})
		total += info.Size()
	}
	slices.SortFunc(files, func(a, b file) int { return a.at.Compare(b.at) })
	kept := make(map[string]bool, len(files))
	trim := total > c.max
	for i, f := range files {
		if trim && total > c.max*3/4 && i < len(files)-1 {
			if err := os.Remove(filepath.Join(c.dir, f.name)); err == nil || os.IsNotExist(err) {
				total -= f.size
				continue
			}
		}
		kept[f.name] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for n := range c.used {
		if !kept[n] && used[n] == c.used[n] { // gone (here or by another process), not fetched again meanwhile
			delete(c.used, n)
		}
	}
	c.size += total - before // what other goroutines added meanwhile stays counted
	c.listed = time.Now()
	c.evicting = false
}

// open is the cache's blobOpener: Open, size-checked against e.
func (c *blobCache) open(e entry) (io.ReadSeekCloser, error) {
	f, err := c.Open(e.SHA256)
	if err != nil {
		return nil, err
	}
	return checkedBlob(f, e)
}
