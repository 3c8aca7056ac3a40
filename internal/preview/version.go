package preview

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"time"
)

// version serves requests from one resolved version: a URL path is looked up in the
// manifest (never on disk), and only blobs, named by hash, are opened, through an os.Root.
type version struct {
	man    manifest
	blobs  blobOpener
	thread string // for the response headers
	id     string
}

// blobOpener opens the blob of e for reading; it fails when the blob is missing or its size
// is not e.Size. Every blob store has one: a Dir's os.Root (rootBlobs), an engine's local
// cache (blobCache.open) and S3 (s3target, through ServeManifest).
type blobOpener func(e entry) (io.ReadSeekCloser, error)

// rootBlobs opens blobs from a Dir's blob directory.
func rootBlobs(root *os.Root) blobOpener {
	return func(e entry) (io.ReadSeekCloser, error) {
		f, err := root.Open(e.SHA256)
		if err != nil {
			return nil, err
		}
		return checkedBlob(f, e)
	}
}

// checkedBlob returns f if it is a regular file of e.Size bytes, else closes it and fails.
func checkedBlob(f *os.File, e entry) (io.ReadSeekCloser, error) {
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() != e.Size {
		f.Close()
		return nil, fmt.Errorf("blob %s is damaged", e.SHA256)
	}
	return f, nil
}

// serve answers r: the page, a redirect to its directory form, or 404. An error means a
// blob could not be read and nothing was written.
func (v version) serve(w http.ResponseWriter, r *http.Request) error {
	if name, ok := v.find(r.URL.Path); ok {
		return v.serveFile(w, r, name, http.StatusOK)
	}
	if !strings.HasSuffix(r.URL.Path, "/") && v.has(path.Join(cleanRel(r.URL.Path), "index.html")) {
		http.Redirect(w, r, redirectTarget(r), http.StatusFound)
		return nil
	}
	return v.notFound(w, r)
}

// find maps a URL path onto a file, Astro-style: "/a/" is a/index.html; "/a" is the file a,
// else a.html. ok is false when none exists.
func (v version) find(urlPath string) (name string, ok bool) {
	rel := cleanRel(urlPath)
	if strings.HasSuffix(urlPath, "/") {
		name = path.Join(rel, "index.html")
		return name, v.has(name)
	}
	for _, name := range []string{rel, rel + ".html"} {
		if v.has(name) {
			return name, true
		}
	}
	return "", false
}

func (v version) has(name string) bool {
	_, ok := v.man.Files[name]
	return ok
}

// cleanRel turns a URL path into a slash-separated path relative to the site root; any ".."
// is resolved against "/" first, so it cannot climb out.
func cleanRel(urlPath string) string {
	rel := strings.TrimPrefix(path.Clean("/"+urlPath), "/")
	if rel == "" {
		return "."
	}
	return rel
}

// redirectTarget is r's path with a trailing slash, query kept.
func redirectTarget(r *http.Request) string {
	target := r.URL.EscapedPath() + "/"
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	return target
}

// serveFile writes the file name of the manifest with status.
func (v version) serveFile(w http.ResponseWriter, r *http.Request, name string, status int) error {
	e := v.man.Files[name]
	f, err := v.blobs(e)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer f.Close()
	v.setHeaders(w, name, e)
	if status == http.StatusOK {
		http.ServeContent(w, r, name, time.Time{}, f)
		return nil
	}
	w.Header().Set("Content-Length", strconv.FormatInt(e.Size, 10))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		io.Copy(w, f)
	}
	return nil
}

// setHeaders sets the type, the content hash as ETag, and which version answered.
func (v version) setHeaders(w http.ResponseWriter, name string, e entry) {
	h := w.Header()
	if ct := contentType(name); ct != "" {
		h.Set("Content-Type", ct)
	}
	h.Set("ETag", `"`+e.SHA256+`"`)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Preview-Thread", v.thread)
	h.Set("X-Preview-Version", v.id)
}

// notFound answers 404 with the site's own 404.html if it has one.
func (v version) notFound(w http.ResponseWriter, r *http.Request) error {
	if v.has("404.html") {
		return v.serveFile(w, r, "404.html", http.StatusNotFound)
	}
	http.Error(w, fmt.Sprintf("no page %s in this preview (and no 404.html)", r.URL.Path), http.StatusNotFound)
	return nil
}

// webTypes fixes the types of common web files, whatever the system's mime tables say.
var webTypes = map[string]string{
	".html":        "text/html; charset=utf-8",
	".css":         "text/css; charset=utf-8",
	".js":          "text/javascript; charset=utf-8",
	".mjs":         "text/javascript; charset=utf-8",
	".json":        "application/json",
	".map":         "application/json",
	".txt":         "text/plain; charset=utf-8",
	".xml":         "application/xml",
	".svg":         "image/svg+xml",
	".ico":         "image/x-icon",
	".woff":        "font/woff",
	".woff2":       "font/woff2",
	".webmanifest": "application/manifest+json",
}

// contentType returns the type for name's extension; "" lets ServeContent sniff.
func contentType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := webTypes[ext]; ok {
		return t
	}
	return mime.TypeByExtension(ext)
}
