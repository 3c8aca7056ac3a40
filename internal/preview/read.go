package preview

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/webordinary/webordinary/internal/tenant"
)

// ErrNoVersion is returned by Versions.Version for a version the thread does not hold (never
// deployed, or pruned).
var ErrNoVersion = errors.New("no such preview version")

// Versions reads published versions back, for whoever needs a version other than the live one
// (the pictures of what a deploy changed render the version before it too).
type Versions interface {
	// Version opens version id of site's thread. It fails with ErrNoVersion when the thread
	// does not hold it (pruned, or never deployed) and with an error matching
	// tenant.ErrInvalid for an invalid site. Safe for concurrent use; the caller closes the
	// Version. A Version stays readable while open only as long as its thread keeps it (see
	// DirConfig.Keep): a request for a blob pruned since answers 500.
	Version(ctx context.Context, site Site, id string) (*Version, error)
}

var _ Versions = (*Dir)(nil)

// LiveVersions reads a project's live site back: for a thread's first deploy, what the owner
// had before is what the site's visitors see, not another thread's preview.
type LiveVersions interface {
	// LiveVersion opens the version the project's live site serves. It fails with
	// ErrNoVersion when the project was never published and with an error matching
	// tenant.ErrInvalid for an invalid project name. The caller closes the Version.
	LiveVersion(ctx context.Context, project string) (*Version, error)
}

var _ LiveVersions = (*Dir)(nil)

// LiveVersion implements LiveVersions.
func (d *Dir) LiveVersion(ctx context.Context, project string) (*Version, error) {
	if err := tenant.ValidatePart("project", project); err != nil {
		return nil, err
	}
	site := Site{Project: project, Thread: liveSlot}
	target, err := resolveLink(d.layout.current(site))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has no live site", ErrNoVersion, project)
	}
	if err != nil {
		return nil, err
	}
	n, ok := versionOf(target)
	if !ok {
		return nil, fmt.Errorf("%w: the live site of %s points at %s", ErrNoVersion, project, filepath.Base(target))
	}
	return d.open(ctx, site, n)
}

// File is one file of a Version.
type File struct {
	SHA256 string // lowercase hex of the content
	Size   int64
}

// Version is one published version of a thread's preview, pinned: it serves that version's
// files over HTTP (the same lookup as Server, whatever the Host header) however often the
// thread deploys since.
type Version struct {
	v    version
	root *os.Root // a Dir's blob directory, closed by Close; nil for other stores
}

// Version implements Versions.
func (d *Dir) Version(ctx context.Context, site Site, id string) (*Version, error) {
	if err := site.Validate(); err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(id)
	if err != nil || n <= 0 {
		return nil, fmt.Errorf("%w: version %q of %s is not a version number", ErrNoVersion, id, site)
	}
	return d.open(ctx, site, n)
}

// open opens version n of site, whose name the caller checked.
func (d *Dir) open(ctx context.Context, site Site, n int) (*Version, error) {
	id := strconv.Itoa(n)
	path := d.layout.manifest(site, n)
	m, err := d.cache.load(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: version %s of %s", ErrNoVersion, id, site)
	}
	if err != nil {
		return nil, err
	}
	blobs, err := os.OpenRoot(filepath.Join(d.layout.thread(site), blobsDir))
	if err != nil {
		return nil, err
	}
	return &Version{v: version{man: m, blobs: rootBlobs(blobs), thread: site.Thread, id: id}, root: blobs}, ctx.Err()
}

// ID is the version's id within its thread (Deployment.Version).
func (v *Version) ID() string { return v.v.id }

// Files lists the version's files by slash-separated path relative to the site root. The map
// is the caller's.
func (v *Version) Files() map[string]File {
	out := make(map[string]File, len(v.v.man.Files))
	for p, e := range v.v.man.Files {
		out[p] = File(e)
	}
	return out
}

// Digest identifies the version's content: a sha256 over its sorted paths and their content
// hashes. Two versions with the same files have the same digest, whichever thread holds them.
func (v *Version) Digest() string {
	paths := make([]string, 0, len(v.v.man.Files))
	for p := range v.v.man.Files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	h := sha256.New()
	for _, p := range paths {
		fmt.Fprintf(h, "%s\x00%s\n", p, v.v.man.Files[p].SHA256)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ServeHTTP serves r.URL.Path from this version, as Server would (GET and HEAD only).
func (v *Version) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed: previews are read-only", http.StatusMethodNotAllowed)
		return
	}
	if err := v.v.serve(w, r); err != nil {
		http.Error(w, "preview unavailable", http.StatusInternalServerError)
	}
}

// Close releases the version's blob store.
func (v *Version) Close() error {
	if v.root == nil {
		return nil
	}
	return v.root.Close()
}

// WriteFiles writes the version's files under dir, an empty directory of the caller's, each
// checked against its size as it is read; so a version already built can be deployed again
// elsewhere (a preview promoted to the live site) without building it again. ctx is checked
// between files.
func (v *Version) WriteFiles(ctx context.Context, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for name, e := range v.v.man.Files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := writeBlob(root, name, e, v.v.blobs); err != nil {
			return fmt.Errorf("write %s of version %s: %w", name, v.v.id, err)
		}
	}
	return nil
}

// writeBlob copies the blob of e to name under root, creating its directories.
func writeBlob(root *os.Root, name string, e entry, open blobOpener) error {
	if d := path.Dir(name); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	in, err := open(e)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, io.LimitReader(in, e.Size+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != e.Size {
		err = fmt.Errorf("blob %s is damaged", e.SHA256)
	}
	return err
}
