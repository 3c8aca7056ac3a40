package preview

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// prune deletes the manifests of site beyond the newest Keep that no symlink points at, then
// every blob that no remaining manifest names, and leftovers of interrupted deploys. The
// caller holds the thread's lock. Failures are logged, not returned: the deploy has succeeded.
func (d *Dir) prune(ctx context.Context, site Site) {
	keep, err := d.pruneManifests(site)
	if err == nil {
		err = d.collectBlobs(site, keep)
	}
	if err != nil {
		d.cfg.Logger.WarnContext(ctx, "preview: prune failed", siteAttrs(site), slog.Any("error", err))
	}
}

// pruneManifests deletes the manifests not kept and returns the kept version numbers.
func (d *Dir) pruneManifests(site Site) (map[int]bool, error) {
	dir := d.layout.versions(site)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	keep := d.keepSet(site, entries)
	for _, e := range entries {
		if prunable(e.Name(), keep) {
			err = errors.Join(err, os.Remove(filepath.Join(dir, e.Name())))
		}
	}
	return keep, err
}

// keepSet returns the version numbers to keep: the newest Keep and any that the thread's
// current or the project's latest points at.
func (d *Dir) keepSet(site Site, entries []os.DirEntry) map[int]bool {
	var versions []int
	for _, e := range entries {
		if n, ok := versionOf(e.Name()); ok && strings.HasSuffix(e.Name(), manifestExt) {
			versions = append(versions, n)
		}
	}
	slices.SortFunc(versions, func(a, b int) int { return b - a })
	keep := map[int]bool{}
	for _, n := range versions[:min(len(versions), d.cfg.Keep)] {
		keep[n] = true
	}
	for _, link := range []string{d.layout.current(site), d.layout.latest(site.Project)} {
		if n, ok := d.pinned(site, link); ok {
			keep[n] = true
		}
	}
	return keep
}

// pinned reports the version of site that link points at, if any.
func (d *Dir) pinned(site Site, link string) (int, bool) {
	target, err := resolveLink(link)
	if err != nil || filepath.Dir(target) != d.layout.versions(site) {
		return 0, false
	}
	return versionOf(target)
}

// prunable reports whether a versions/ entry may go: a leftover temporary file, or a
// manifest whose number is not kept.
func prunable(name string, keep map[int]bool) bool {
	if strings.HasSuffix(name, tmpExt) {
		return true
	}
	prefix, _, _ := strings.Cut(name, ".")
	n, err := strconv.Atoi(prefix)
	return err == nil && !keep[n]
}

// collectBlobs deletes the blobs of site that no kept manifest names.
func (d *Dir) collectBlobs(site Site, keep map[int]bool) error {
	live, err := d.liveBlobs(site, keep)
	if err != nil {
		return fmt.Errorf("not collecting blobs: %w", err)
	}
	dir := d.layout.blobs(site)
	entries, err := os.ReadDir(dir)
	for _, e := range entries {
		if !live[e.Name()] {
			err = errors.Join(err, os.Remove(filepath.Join(dir, e.Name())))
		}
	}
	return err
}

// liveBlobs returns the hashes the kept manifests name.
func (d *Dir) liveBlobs(site Site, keep map[int]bool) (map[string]bool, error) {
	live := map[string]bool{}
	for n := range keep {
		m, err := d.cache.load(d.layout.manifest(site, n))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range m.Files {
			live[e.SHA256] = true
		}
	}
	return live, nil
}
