package dashboard

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/shots"
)

// pictures reads a final job's pictures report; nil when pictures are not configured or the
// job has none (it changed nothing, or ran before pictures existed).
func (d *Dashboard) pictures(id string) *shots.Report {
	if d.cfg.Pictures == nil {
		return nil
	}
	rep, err := d.cfg.Pictures.Report(id)
	if err != nil {
		if !errors.Is(err, shots.ErrNoPictures) {
			d.log.Warn("dashboard: read pictures report", "job", id, "err", err)
		}
		return nil
	}
	return &rep
}

// picture serves one of a job's full-size pictures (GET /jobs/{id}/pictures/{file}).
func (d *Dashboard) picture(w http.ResponseWriter, r *http.Request) {
	id, name := r.PathValue("id"), r.PathValue("file")
	if d.cfg.Pictures == nil || !broker.IsJobID(id) {
		http.NotFound(w, r)
		return
	}
	p, err := d.cfg.Pictures.Path(id, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	f, err := os.Open(p)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	types := map[string]string{".png": "image/png", ".jpg": "image/jpeg"}
	ctype, ok := types[filepath.Ext(name)]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "private, max-age=3600")
	var mod time.Time
	if fi, err := f.Stat(); err == nil {
		mod = fi.ModTime()
	}
	http.ServeContent(w, r, "", mod, f)
}
