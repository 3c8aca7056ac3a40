package s3target

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/webordinary/webordinary/internal/preview"
)

// Server is an http.Handler that serves the store's sites by Host header: preview hosts
// (edit.<project>.<Domain>, <thread>.edit.<project>.<Domain>) from previews, <project>.<Domain>
// from the project's live site (DeployProduction), and, when Production is set, any other
// host from production/<host>/ (Publish; a host under Domain is always a project's). A request reads its pointer once
// and is answered from that version only. GET and HEAD only; Cache-Control: no-cache.
type Server struct {
	s *Store
	// Production serves hosts that are not preview hosts from the production sites.
	Production bool
}

var _ http.Handler = (*Server)(nil)

// Server returns an http.Handler for the store's previews (and production sites if asked).
func (s *Store) Server(production bool) *Server { return &Server{s: s, Production: production} }

// ServeHTTP implements http.Handler.
func (h *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed: sites are read-only", http.StatusMethodNotAllowed)
		return
	}
	key, missing, err := h.pointerFor(r.Host)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	h.serve(w, r, key, missing)
}

// pointerFor returns the pointer key for a Host and the 404 text for a site without version.
func (h *Server) pointerFor(host string) (key, missing string, err error) {
	site, live, err := preview.HostSite(host, h.s.cfg.Domain)
	if err == nil {
		return h.s.previewPointer(site, live), preview.MissingText(site, live), nil
	}
	name := strings.TrimSuffix(strings.ToLower(stripPort(host)), ".")
	if !h.Production || !hostPattern.MatchString(name) {
		return "", "", err
	}
	return h.s.hostLine(name).pointers[0], fmt.Sprintf("nothing is published at %s yet", name), nil
}

// serve reads the pointer once and answers from the version it names.
func (h *Server) serve(w http.ResponseWriter, r *http.Request, key, missing string) {
	ctx := r.Context()
	p, err := h.s.readPointer(ctx, key)
	if err == nil && p.target == "" {
		http.Error(w, missing, http.StatusNotFound)
		return
	}
	var m preview.Manifest
	if err == nil {
		m, err = h.s.manifest(ctx, p.target)
	}
	if err == nil {
		err = preview.ServeManifest(w, r, m, h.s.opener(ctx, blobPrefix(p.target)), threadOf(p.target), fmt.Sprint(p.version))
	}
	if err != nil {
		h.s.cfg.Logger.WarnContext(ctx, "s3target: serve failed", slog.String("host", r.Host),
			slog.String("path", r.URL.Path), slog.Any("error", err))
		http.Error(w, "site unavailable", http.StatusInternalServerError)
	}
}

// blobPrefix returns the blob prefix for a manifest key: previews/<p>/threads/<t>/versions/<n>.json
// and previews/<p>/live/versions/<n>.json → previews/<p>/blobs/; production/<h>/versions/<n>.json
// → production/<h>/blobs/.
func blobPrefix(manifestKey string) string {
	if i := strings.LastIndex(manifestKey, "/threads/"); i >= 0 {
		return manifestKey[:i] + "/blobs/"
	}
	if i := strings.LastIndex(manifestKey, "/live/versions/"); i >= 0 {
		return manifestKey[:i] + "/blobs/"
	}
	return strings.TrimSuffix(manifestKey[:strings.LastIndex(manifestKey, "/versions/")], "/") + "/blobs/"
}

// threadOf returns the thread of a preview manifest key, "" for production.
func threadOf(manifestKey string) string {
	_, rest, ok := strings.Cut(manifestKey, "/threads/")
	if !ok {
		return ""
	}
	t, _, _ := strings.Cut(rest, "/")
	return t
}

func stripPort(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return host
}

// opener opens blobs under prefix. The first GET is made at once, so a missing blob fails
// before anything is written.
func (s *Store) opener(ctx context.Context, prefix string) preview.BlobOpener {
	return func(e preview.ManifestEntry) (io.ReadSeekCloser, error) {
		o := &object{ctx: ctx, s: s, key: prefix + e.SHA256, size: e.Size}
		if err := o.fetch(); err != nil {
			return nil, err
		}
		return o, nil
	}
}

// object reads an S3 object with ranged GETs: http.ServeContent seeks to learn the size and to
// serve ranges, and a GET is made from wherever reading starts.
type object struct {
	ctx     context.Context
	s       *Store
	key     string
	size    int64
	off     int64         // the reader's position
	body    io.ReadCloser // an open GET, positioned at bodyOff
	bodyOff int64
}

// fetch opens a GET from the current offset.
func (o *object) fetch() error {
	in := &s3.GetObjectInput{Bucket: &o.s.cfg.Bucket, Key: &o.key}
	if o.off > 0 {
		in.Range = aws.String(fmt.Sprintf("bytes=%d-", o.off))
	}
	out, err := o.s.cfg.Client.GetObject(o.ctx, in)
	if err != nil {
		return fmt.Errorf("blob %s: %w", o.key, err)
	}
	o.body, o.bodyOff = out.Body, o.off
	return nil
}

func (o *object) Read(p []byte) (int, error) {
	if o.off >= o.size {
		return 0, io.EOF
	}
	if o.body != nil && o.bodyOff != o.off {
		o.Close()
	}
	if o.body == nil {
		if err := o.fetch(); err != nil {
			return 0, err
		}
	}
	n, err := o.body.Read(p)
	o.off += int64(n)
	o.bodyOff = o.off
	if errors.Is(err, io.EOF) && o.off < o.size {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// Seek only moves the position; the next Read fetches from there if needed.
func (o *object) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += o.off
	case io.SeekEnd:
		offset += o.size
	}
	if offset < 0 {
		return 0, errors.New("seek before start")
	}
	o.off = offset
	return o.off, nil
}

func (o *object) Close() error {
	if o.body == nil {
		return nil
	}
	err := o.body.Close()
	o.body = nil
	return err
}
