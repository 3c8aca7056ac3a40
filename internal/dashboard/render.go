package dashboard

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/pipeline/report"
)

//go:embed templates static
var assets embed.FS

// view is what every template gets: the page frame plus the page's own Data.
type view struct {
	Title string
	// Nav names the active navigation entry.
	Nav  string
	CSRF string
	// Events is the page's Server-Sent Events URL; empty for a page that does not update.
	Events string
	// Back is this page's path, where actions on it redirect to.
	Back string
	// Notice is Config.Notice, shown on every page.
	Notice string
	Data   any
}

// pages holds one template set per page: the layout, shared parts and the page's content.
type pages struct {
	byName map[string]*template.Template
}

var pageNames = []string{"overview", "job", "dead", "quarantine", "held", "replies", "problem"}

func parsePages() (*pages, error) {
	p := &pages{byName: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(assets,
			"templates/layout.html", "templates/parts.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("dashboard: parse %s page: %w", name, err)
		}
		p.byName[name] = t
	}
	return p, nil
}

// render executes the named template of page into a string.
func (p *pages) render(page, name string, v *view) (string, error) {
	var buf bytes.Buffer
	if err := p.byName[page].ExecuteTemplate(&buf, name, v); err != nil {
		return "", fmt.Errorf("dashboard: render %s/%s: %w", page, name, err)
	}
	return buf.String(), nil
}

// write renders a whole page and writes it with status; a render error becomes a 500.
func (d *Dashboard) write(w http.ResponseWriter, r *http.Request, status int, page string, v *view) {
	v.CSRF, v.Notice = d.csrf, d.cfg.Notice
	html, err := d.pages.render(page, "layout", v)
	if err != nil {
		d.log.ErrorContext(r.Context(), "render page", "page", page, "err", err)
		http.Error(w, "the dashboard could not render this page; see the server log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(html))
}

// problem writes the error page: what went wrong and a way back.
func (d *Dashboard) problem(w http.ResponseWriter, r *http.Request, status int, msg string) {
	d.write(w, r, status, "problem", &view{Title: http.StatusText(status), Data: msg})
}

var funcs = template.FuncMap{
	"iso":        iso,
	"clock":      clock,
	"dur":        compactDuration,
	"ms":         func(n int64) string { return compactDuration(time.Duration(n) * time.Millisecond) },
	"excerpt":    excerpt,
	"spec":       jobspec.Of,
	"short":      shortID,
	"stateClass": stateClass,
	"workerClass": func(s string) string {
		switch s {
		case "idle", "owning", "running", "stopped":
			return "w-" + s
		}
		return "w-other"
	},
	"ran":     ran,
	"preview": firstPreview,
	"money":   func(f float64) string { return fmt.Sprintf("$%.4f", f) },
}

// iso formats t for a datetime attribute (read by the script for relative times).
func iso(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// clock is the fallback text of a time before the script makes it relative: stable, so
// re-rendered fragments only change when the data does.
func clock(t time.Time) string {
	if time.Since(t) < 20*time.Hour {
		return t.Local().Format("15:04:05")
	}
	return t.Local().Format("Jan 2 15:04")
}

// compactDuration prints d at a precision that suits its size: 850ms, 4.2s, 3m12s, 5h4m.
func compactDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
}

// excerpt is the first line of s, cut to n characters.
func excerpt(n int, s string) string {
	s = strings.TrimSpace(s)
	line, _, more := strings.Cut(s, "\n")
	line = strings.TrimSpace(line)
	if utf8.RuneCountInString(line) > n {
		return string([]rune(line)[:n-1]) + "…"
	}
	if more {
		return line + " …"
	}
	return line
}

// shortID keeps the last 8 characters of a job id (its random part), enough to tell jobs apart.
func shortID(id string) string {
	if len(id) <= 10 {
		return id
	}
	return "…" + id[len(id)-8:]
}

func stateClass(s broker.State) string {
	switch s {
	case broker.StateQueued, broker.StateClaimed, broker.StateRunning, broker.StateDone,
		broker.StateFailed, broker.StateInterrupted, broker.StateDead:
		return "s-" + string(s)
	}
	return "s-other"
}

// ran is how long a final job ran: from its start (or acceptance) to its end.
func ran(rec broker.JobRecord) time.Duration {
	from := rec.StartedAt
	if from.IsZero() {
		from = rec.Job.AcceptedAt
	}
	if rec.FinishedAt.IsZero() {
		return 0
	}
	return rec.FinishedAt.Sub(from)
}

// firstPreview is the job's first preview URL that may be a link, or "".
func firstPreview(rec broker.JobRecord) string {
	if rec.Result == nil {
		return ""
	}
	for _, l := range (details{report.Of(*rec.Result)}).Previews() {
		if l.Safe {
			return l.URL
		}
	}
	return ""
}
