package preview

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// What the switch guarantees, and what this test checks:
//
//  1. One HTTP response comes from one version: its body's marker equals the version the
//     server names in X-Preview-Version, and a page present in every version never 404s.
//  2. A client's successive requests never go back to an older version.
//  3. A reader that resolves current once and then reads files under it sees one version's
//     files only. If that version is pruned meanwhile (Keep deploys later), its reads fail
//     with fs.ErrNotExist; they never return another version's content.
//
// Not guaranteed: two separate requests (say a page and its CSS) may come from two versions
// if a deploy lands between them.
func TestAtomicSwitch(t *testing.T) {
	t.Parallel()
	const (
		versions = 25
		pages    = 10
		readers  = 2
	)
	e := setup(t, DirConfig{Keep: 2})
	site := Site{"acme", "t1"}
	src := t.TempDir()
	writeTree(t, src, markedPages(pages, 1))
	e.deploy(site, src)

	var seen atomic.Int64 // highest version any HTTP reader has seen
	var done atomic.Bool
	var wg sync.WaitGroup
	for i := range readers {
		host := []string{"t1.edit.acme.localhost", "edit.acme.localhost"}[i%2]
		wg.Go(func() { httpReader(t, e, host, pages, &seen, &done) })
	}
	var pruned atomic.Int64
	wg.Go(func() { fsReader(t, e, site, pages, &pruned, &done) })

	for v := 2; v <= versions && !t.Failed(); v++ {
		writeTree(t, src, markedPages(pages, v))
		e.deploy(site, src)
		// Let readers catch up so every version is read while the next one is deployed.
		waitUntil(t, fmt.Sprintf("a reader sees v%d", v), func() bool { return seen.Load() >= int64(v) || t.Failed() })
	}
	done.Store(true)
	wg.Wait()
	t.Logf("file-level reads that hit a pruned version: %d", pruned.Load())
}

// markedPages returns n pages that all carry the marker of version v.
func markedPages(n, v int) map[string]string {
	files := map[string]string{}
	for i := range n {
		files[fmt.Sprintf("p%02d/index.html", i)] = fmt.Sprintf("<p>page %d of v%d</p>", i, v)
	}
	return files
}

var markerRE = regexp.MustCompile(`of v(\d+)<`)

// marker returns the version a page says it belongs to.
func marker(body string) int {
	m := markerRE.FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// httpReader fetches pages until done, checking guarantees 1 and 2.
func httpReader(t *testing.T, e *env, host string, pages int, seen *atomic.Int64, done *atomic.Bool) {
	last := 0
	for i := 0; !done.Load(); i++ {
		path := fmt.Sprintf("/p%02d/", i%pages)
		r, err := e.fetch("GET", host, path, nil)
		if err != nil {
			t.Error(err)
			return
		}
		v, _ := strconv.Atoi(r.header.Get("X-Preview-Version"))
		switch got := marker(r.body); {
		case r.status != 200:
			t.Errorf("%s%s = %d %q during deploys", host, path, r.status, r.body)
			return
		case got != v:
			t.Errorf("%s%s: body from v%d, header says v%d", host, path, got, v)
			return
		case got < last:
			t.Errorf("%s: went back from v%d to v%d", host, last, got)
			return
		}
		last = v
		for old := seen.Load(); int64(v) > old && !seen.CompareAndSwap(old, int64(v)); old = seen.Load() {
		}
	}
}

// fsReader resolves current once per snapshot and reads every page of that version
// (guarantee 3).
func fsReader(t *testing.T, e *env, site Site, pages int, pruned *atomic.Int64, done *atomic.Bool) {
	link := layout{e.root}.current(site)
	for !done.Load() {
		target, err := resolveLink(link)
		if err != nil {
			t.Errorf("resolve current: %v", err)
			return
		}
		want, _ := versionOf(target)
		if err := readSnapshot(target, pages, want); errors.Is(err, fs.ErrNotExist) {
			pruned.Add(1)
		} else if err != nil {
			t.Error(err)
			return
		}
	}
}

// readSnapshot reads every page of the version whose manifest is at manifestPath and checks
// that each carries the marker of version want.
func readSnapshot(manifestPath string, pages, want int) error {
	m, err := readManifest(manifestPath)
	if err != nil {
		return err
	}
	for i := range pages {
		e := m.Files[fmt.Sprintf("p%02d/index.html", i)]
		b, err := os.ReadFile(filepath.Join(threadDirOf(manifestPath), blobsDir, e.SHA256))
		if err != nil {
			return err
		}
		if got := marker(string(b)); got != want {
			return fmt.Errorf("snapshot v%d, page %d: from v%d", want, i, got)
		}
	}
	return nil
}
