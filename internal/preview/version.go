package preview

import (
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// version serves requests from one resolved version directory. Every open goes through root,
// so neither ".." nor a symlink can lead outside it.
type version struct {
	root *os.Root
	dir  string // .../threads/<thread>/versions/<n>, for the response headers
}

// serve writes the page r asks for, or a redirect to its directory form. It returns false,
// having written nothing, when there is no such page.
func (v version) serve(w http.ResponseWriter, r *http.Request) bool {
	name, ok := v.find(r.URL.Path)
	if !ok {
		if v.isFile(path.Join(cleanRel(r.URL.Path), "index.html")) {
			http.Redirect(w, r, redirectTarget(r), http.StatusFound)
			return true
		}
		return false
	}
	return v.serveFile(w, r, name, http.StatusOK)
}

// find maps a URL path onto a file, Astro-style: "/a/" is a/index.html; "/a" is the file a,
// else a.html. ok is false when none exists.
func (v version) find(urlPath string) (name string, ok bool) {
	rel := cleanRel(urlPath)
	if strings.HasSuffix(urlPath, "/") {
		name = path.Join(rel, "index.html")
		return name, v.isFile(name)
	}
	for _, name := range []string{rel, rel + ".html"} {
		if v.isFile(name) {
			return name, true
		}
	}
	return "", false
}

// cleanRel turns a URL path into a slash-separated path relative to the version root; any
// ".." is resolved against "/" first, so it cannot climb out.
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

// isFile reports whether name is a regular file in the version.
func (v version) isFile(name string) bool {
	fi, err := v.root.Stat(filepath.FromSlash(name))
	return err == nil && fi.Mode().IsRegular()
}

// serveFile writes file name with status. It returns false, having written nothing, if the
// file cannot be opened (the version was pruned meanwhile).
func (v version) serveFile(w http.ResponseWriter, r *http.Request, name string, status int) bool {
	f, err := v.root.Open(filepath.FromSlash(name))
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	v.setHeaders(w, name, fi)
	if status == http.StatusOK {
		http.ServeContent(w, r, name, time.Time{}, f)
		return true
	}
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		io.Copy(w, f)
	}
	return true
}

// setHeaders sets the type, a validator and which version answered. Files are never changed
// in place (a changed file is a new inode with a new mtime; an unchanged one is hard-linked
// and keeps its mtime), so size and mtime identify the content.
func (v version) setHeaders(w http.ResponseWriter, name string, fi os.FileInfo) {
	h := w.Header()
	if ct := contentType(name); ct != "" {
		h.Set("Content-Type", ct)
	}
	h.Set("ETag", fmt.Sprintf(`"%x-%x"`, fi.Size(), fi.ModTime().UnixNano()))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Preview-Thread", threadOf(v.dir))
	h.Set("X-Preview-Version", filepath.Base(v.dir))
}

// notFound answers 404 with the site's own 404.html if it has one.
func (v version) notFound(w http.ResponseWriter, r *http.Request) {
	if v.isFile("404.html") && v.serveFile(w, r, "404.html", http.StatusNotFound) {
		return
	}
	http.Error(w, fmt.Sprintf("no page %s in this preview (and no 404.html)\n", r.URL.Path), http.StatusNotFound)
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
