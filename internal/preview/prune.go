package preview

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// prune deletes the versions of site beyond the newest Keep that no symlink points at, with
// their manifests and any leftovers of interrupted deploys. The caller holds the thread's
// lock. Failures are logged, not returned: the deploy itself has succeeded.
func (d *Dir) prune(ctx context.Context, site Site) {
	dir := d.layout.versions(site)
	entries, err := os.ReadDir(dir)
	if err != nil {
		d.cfg.Logger.WarnContext(ctx, "preview: prune failed", siteAttrs(site), slog.Any("error", err))
		return
	}
	keep := d.keepSet(site, entries)
	for _, e := range entries {
		if !prunable(e.Name(), keep) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			d.cfg.Logger.WarnContext(ctx, "preview: prune failed", siteAttrs(site), slog.Any("error", err))
		}
	}
}

// keepSet returns the version numbers to keep: the newest Keep and any that the thread's
// current or the project's latest points at.
func (d *Dir) keepSet(site Site, entries []os.DirEntry) map[int]bool {
	var versions []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() {
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

// prunable reports whether a versions/ entry may go: a staging leftover (<n>.tmp,
// <n>.json.tmp), or a version directory or manifest whose number is not kept.
func prunable(name string, keep map[int]bool) bool {
	if strings.HasSuffix(name, stagingExt) {
		return true
	}
	prefix, _, _ := strings.Cut(name, ".")
	n, err := strconv.Atoi(prefix)
	return err == nil && !keep[n]
}
