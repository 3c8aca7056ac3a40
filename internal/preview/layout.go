package preview

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The on-disk layout shared by Dir (which writes it) and Server (which reads it).
const (
	threadsDir  = "threads"
	versionsDir = "versions"
	blobsDir    = "blobs"
	currentName = "current"
	latestName  = "latest"
	manifestExt = ".json" // versions/<n>.json: the manifest of version n
	tmpExt      = ".tmp"  // a file being written; renamed into place when complete
	// liveSlot is the thread directory of a project's live site: never a valid thread name.
	liveSlot = "_live"
	// fencesExt names the file beside a pointer symlink holding its fences (JSON).
	fencesExt = ".fences"
	// switchLockName is the file in a project's directory whose flock serializes its switches
	// across processes.
	switchLockName = ".switch.lock"
)

// layout computes the paths under one root. Names must be validated before use.
type layout struct{ root string }

func (l layout) latest(project string) string { return filepath.Join(l.root, project, latestName) }

func (l layout) thread(s Site) string   { return filepath.Join(l.root, s.Project, threadsDir, s.Thread) }
func (l layout) current(s Site) string  { return filepath.Join(l.thread(s), currentName) }
func (l layout) versions(s Site) string { return filepath.Join(l.thread(s), versionsDir) }
func (l layout) blobs(s Site) string    { return filepath.Join(l.thread(s), blobsDir) }

func (l layout) manifest(s Site, n int) string {
	return filepath.Join(l.versions(s), strconv.Itoa(n)+manifestExt)
}

// currentTarget and latestTarget are the relative symlink targets for version n of s.
func currentTarget(n int) string { return filepath.Join(versionsDir, strconv.Itoa(n)+manifestExt) }

func latestTarget(s Site, n int) string {
	return filepath.Join(threadsDir, s.Thread, versionsDir, strconv.Itoa(n)+manifestExt)
}

// resolveLink reads the symlink link once and returns the manifest path it names. The
// target must be a local relative path (no "..", not absolute), as Dir writes them.
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

// versionOf parses the version number of a manifest path .../versions/<n>.json.
func versionOf(manifestPath string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(manifestPath), manifestExt))
	return n, err == nil && n > 0
}

// threadDirOf returns .../threads/<thread> for a manifest path inside it.
func threadDirOf(manifestPath string) string { return filepath.Dir(filepath.Dir(manifestPath)) }

// swapLink points link at target atomically: a new symlink renamed over the old one.
func swapLink(link, target string) error {
	tmp := tmpName(link)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// readFences returns the fences stored beside the pointer symlink link; none when there are
// none yet.
func readFences(link string) (Fences, error) {
	b, err := os.ReadFile(link + fencesExt)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out Fences
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("fences of %s: %w", link, err)
	}
	return out, nil
}

// writeFences stores stored beside the pointer symlink link, atomically (a renamed file).
func writeFences(link string, stored Fences) error {
	b, err := json.Marshal(stored)
	if err != nil {
		return err
	}
	tmp := tmpName(link + fencesExt)
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, link+fencesExt); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// tmpName returns a fresh name next to path for a file to be renamed onto path.
func tmpName(path string) string {
	return path + "." + strings.ToLower(rand.Text()[:8]) + tmpExt
}
