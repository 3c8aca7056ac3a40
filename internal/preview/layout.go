package preview

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The on-disk layout shared by Dir (which writes it) and Server (which reads it).
const (
	threadsDir  = "threads"
	versionsDir = "versions"
	currentName = "current"
	latestName  = "latest"
	stagingExt  = ".tmp"  // versions/<n>.tmp: a version being built
	manifestExt = ".json" // versions/<n>.json: its manifest
)

// layout computes the paths under one root. Names must be validated before use.
type layout struct{ root string }

func (l layout) project(p string) string { return filepath.Join(l.root, p) }
func (l layout) latest(p string) string  { return filepath.Join(l.root, p, latestName) }

func (l layout) thread(s Site) string   { return filepath.Join(l.root, s.Project, threadsDir, s.Thread) }
func (l layout) current(s Site) string  { return filepath.Join(l.thread(s), currentName) }
func (l layout) versions(s Site) string { return filepath.Join(l.thread(s), versionsDir) }

func (l layout) version(s Site, n int) string {
	return filepath.Join(l.versions(s), strconv.Itoa(n))
}

func (l layout) manifest(s Site, n int) string { return l.version(s, n) + manifestExt }
func (l layout) staging(s Site, n int) string  { return l.version(s, n) + stagingExt }

// currentTarget and latestTarget are the relative symlink targets for version n of s.
func currentTarget(n int) string { return filepath.Join(versionsDir, strconv.Itoa(n)) }

func latestTarget(s Site, n int) string {
	return filepath.Join(threadsDir, s.Thread, versionsDir, strconv.Itoa(n))
}

// resolveLink reads the symlink link once and returns the directory it names. The target
// must be a local relative path (no "..", not absolute), as Dir writes them.
func resolveLink(link string) (string, error) {
	target, err := os.Readlink(link)
	if err != nil {
		return "", err
	}
	if !filepath.IsLocal(target) {
		return "", fmt.Errorf("symlink %s points outside its directory (%q)", link, target)
	}
	return filepath.Join(filepath.Dir(link), target), nil
}

// versionOf parses the version number from a version directory path (its last element).
func versionOf(dir string) (int, bool) {
	n, err := strconv.Atoi(filepath.Base(dir))
	return n, err == nil && n > 0
}

// threadOf returns the thread of a version directory path .../threads/<thread>/versions/<n>.
func threadOf(dir string) string {
	return filepath.Base(filepath.Dir(filepath.Dir(dir)))
}

// swapLink points link at target atomically: a new symlink renamed over the old one.
func swapLink(link, target string) error {
	tmp := link + ".new-" + strings.ToLower(rand.Text()[:10])
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
