package preview

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// The portable layer for targets other than Dir (an object store such as S3): they share the
// manifest format, the walk over a build output, the Host names and the way a version answers
// a request, so only storage differs between backends.

// Manifest lists the files of one version: slash path → blob. Written once, never changed.
type Manifest = manifest

// ManifestEntry is one file of a version; its content is the blob named SHA256.
type ManifestEntry = entry

// EncodeManifest returns m's JSON, the same bytes Dir writes.
func EncodeManifest(m Manifest) ([]byte, error) { return json.Marshal(m) }

// DecodeManifest parses and checks a manifest; name is used in errors only.
func DecodeManifest(name string, b []byte) (Manifest, error) {
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return manifest{}, fmt.Errorf("manifest %s: %w", name, err)
	}
	if m.Files == nil {
		m.Files = map[string]entry{}
	}
	return m, m.check(name)
}

// SourceFile is one file of a build output tree.
type SourceFile struct {
	// Path is the file's slash-separated path relative to the tree's root.
	Path string
	f    srcFile
}

// Open opens the file, checking that it is (still) a regular file, and returns its size.
func (f SourceFile) Open() (*os.File, int64, error) { return f.f.open() }

// Hash reads the file once and returns its manifest entry. The read stops when the walk's
// context ends and at the size the file had when opened: the tree is the job's, and a file
// may grow while it is read or be a terabyte of holes.
func (f SourceFile) Hash() (ManifestEntry, error) { return hashSource(f.f) }

// WalkSource calls visit, concurrently (at most workers at once), for every file of the build
// output directory dir, with the same rules as Dir.Deploy: a symlink to a regular file inside
// the tree is a copy of its target, anything else unusual fails with ErrUnsafeSource. It stops
// at the first error and returns it; a cancelled ctx returns ctx.Err().
func WalkSource(ctx context.Context, dir string, workers int, visit func(SourceFile) error) error {
	root, err := sourceRoot(dir)
	if err != nil {
		return err
	}
	top, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer top.Close()
	return walkTree(ctx, top, max(workers, 1), func(f srcFile) error {
		return visit(SourceFile{Path: f.rel, f: f})
	})
}

// BlobOpener opens the content of e for reading (for ServeManifest). It fails when the blob is
// missing; the reader must deliver exactly e.Size bytes.
type BlobOpener func(e ManifestEntry) (io.ReadSeekCloser, error)

// ServeManifest answers r from the version m, exactly as Server does: the page (Astro-style
// path fallbacks), a redirect to a directory's slash form, or 404 with the site's own
// 404.html. thread and version fill the X-Preview-Thread and X-Preview-Version headers. An
// error means a blob could not be opened and nothing was written.
func ServeManifest(w http.ResponseWriter, r *http.Request, m Manifest, open BlobOpener, thread, version string) error {
	v := versionFor(m, open, thread, version)
	return v.serve(w, r)
}

// versionFor wraps a portable opener for the version type.
func versionFor(m Manifest, open BlobOpener, thread, id string) version {
	return version{man: m, blobs: blobOpener(open), thread: thread, id: id}
}

// HostSite names the site a Host header addresses under domain: edit.<project>.<domain> is
// the project's latest preview (Thread is ""), <thread>.edit.<project>.<domain> a thread's,
// and <project>.<domain> the project's live site (live is true, Thread ""). A port is
// ignored. The error explains the expected forms; for a bad name it matches tenant.ErrInvalid.
func HostSite(host, domain string) (site Site, live bool, err error) {
	p, err := parseHost(host, normalDomain(domain))
	if err != nil {
		return Site{}, false, err
	}
	return Site{Project: p.project, Thread: p.thread}, p.live, nil
}

// MissingText is the 404 text for a site without a version (Thread "" is the project's
// latest; live is the project's live site).
func MissingText(s Site, live bool) string {
	return preview{project: s.Project, thread: s.Thread, live: live}.missing()
}

// normalDomain lowercases domain and trims dots; empty is "localhost".
func normalDomain(domain string) string {
	d := strings.Trim(strings.ToLower(domain), ".")
	if d == "" {
		return "localhost"
	}
	return d
}

// NewVersion is the Version of m for a store outside this package (its Versions): open reads
// the blobs, thread and id fill the headers and ID. Close releases nothing.
func NewVersion(m Manifest, open BlobOpener, thread, id string) *Version {
	return &Version{v: versionFor(m, open, thread, id)}
}
