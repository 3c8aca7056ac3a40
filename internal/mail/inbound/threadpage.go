package inbound

import (
	"cmp"
	"context"
	"crypto/hmac"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/mail/outbox"
	"github.com/webordinary/webordinary/internal/pipeline/report"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/router"
)

// threadScan is how many of the newest jobs the thread page looks through for the thread's.
const threadScan = 500

// threadPage is what the thread page shows.
type threadPage struct {
	Error      string
	Notice     string
	Subject    string
	Token      string // the link's token: the page's own address is /t/<Token>
	CSRF       string
	PreviewURL string
	LiveURL    string
	Publish    bool // a preview exists to publish
	Undo       bool // a publish is live to undo
	Running    bool // a job is running or queued: the page refreshes itself
	Steps      []threadStep
}

// threadStep is one instruction of the thread and what came of it.
type threadStep struct {
	Instruction string
	State       string // in plain words
	Since       time.Time
	Summary     string
	Pictures    []threadPicture
}

// threadPicture is one before/after pair of a changed page at a width.
type threadPicture struct {
	Alt, Before, After string // After is the outlined picture when there is one
}

// ThreadHandler serves the owner's thread pages under /t/: GET shows the thread (its
// instructions and replies, the running job, before/after pictures, the preview and live
// links); POST /t/<token>/publish and /t/<token>/undo act on it. Mount it without the
// dashboard's token: the signed link is the credential, and only for its own thread.
func (in *Inbound) ThreadHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'")
		token, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/t/"), "/")
		link, err := in.openThreadLink(r.Context(), token)
		if err != nil {
			in.threadError(w, r, err)
			return
		}
		switch {
		case rest == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			in.renderThread(w, r, link, notices[r.URL.Query().Get("done")])
		case strings.HasPrefix(rest, "pictures/") && r.Method == http.MethodGet:
			in.servePicture(w, r, link, strings.TrimPrefix(rest, "pictures/"))
		case (rest == "publish" || rest == "undo") && r.Method == http.MethodPost:
			in.threadAction(w, r, link, rest)
		default:
			http.Error(w, "not found", http.StatusNotFound)
		}
	})
}

// threadError answers a refused link with a plain page.
func (in *Inbound) threadError(w http.ResponseWriter, r *http.Request, err error) {
	msg, code := "Something went wrong on our side; please try again in a minute.", http.StatusServiceUnavailable
	if errors.Is(err, errThreadInvalid) || errors.Is(err, errThreadExpired) || errors.Is(err, errThreadRevoked) {
		msg, code = strings.ToUpper(err.Error()[:1])+err.Error()[1:]+".", http.StatusForbidden
	} else {
		in.cfg.Logger.WarnContext(r.Context(), "thread page", slog.Any("err", err))
	}
	w.WriteHeader(code)
	_ = threadTemplate.Execute(w, threadPage{Error: msg})
}

// threadJobs are the records of link's thread, oldest first.
func (in *Inbound) threadJobs(ctx context.Context, link threadLink) ([]broker.JobRecord, error) {
	recs, err := in.cfg.Jobs.Recent(ctx, threadScan)
	if err != nil {
		return nil, err
	}
	var out []broker.JobRecord
	for _, rec := range recs {
		if rec.Job.Tenant == link.tenant && rec.Job.Thread == link.thread {
			out = append(out, rec)
		}
	}
	slices.Reverse(out)
	return out, nil
}

// thread reads link's thread record; a thread of another tenant is not found.
func (in *Inbound) thread(ctx context.Context, link threadLink) (project.Thread, error) {
	th, err := in.cfg.Threads.Get(ctx, link.thread)
	if err == nil && th.Tenant != link.tenant {
		return project.Thread{}, broker.ErrNotFound
	}
	return th, err
}

func (in *Inbound) renderThread(w http.ResponseWriter, r *http.Request, link threadLink, notice string) {
	ctx := r.Context()
	recs, err := in.threadJobs(ctx, link)
	if err != nil {
		in.threadError(w, r, err)
		return
	}
	th, err := in.thread(ctx, link)
	if err != nil && !errors.Is(err, broker.ErrNotFound) {
		in.threadError(w, r, err)
		return
	}
	p := threadPage{Notice: notice, Token: link.token, CSRF: in.csrfToken(link.token), Subject: "Your changes"}
	for _, rec := range recs {
		if s := jobspec.Of(rec.Job).Subject; s != "" {
			p.Subject = s
		}
		if !rec.State.Final() {
			p.Running = true
		}
		if res := rec.Result; res != nil && res.State == broker.StateDone && len(report.Of(*res).PreviewURLs) > 0 {
			p.PreviewURL = report.Of(*res).PreviewURLs[0]
		}
		p.Steps = append(p.Steps, in.step(link, rec))
	}
	if i := th.LastLive(); i >= 0 {
		p.LiveURL, p.Undo = th.Publishes[i].URL, true
	}
	p.Publish = th.Built != nil
	if err := threadTemplate.Execute(w, p); err != nil {
		in.cfg.Logger.WarnContext(ctx, "thread page", slog.Any("err", err))
	}
}

// step is one job as the thread page shows it.
func (in *Inbound) step(link threadLink, rec broker.JobRecord) threadStep {
	spec := jobspec.Of(rec.Job)
	s := threadStep{Instruction: cmp.Or(spec.Action, spec.Instruction), Since: rec.Job.AcceptedAt}
	switch {
	case rec.State == broker.StateRunning && !rec.BusySince.IsZero():
		s.State = "Working on it — the AI service is busy, so this is taking longer than usual."
	case rec.State == broker.StateRunning:
		s.State, s.Since = "Working on it now.", rec.StartedAt
	case !rec.State.Final():
		s.State = "Waiting its turn."
	case rec.State == broker.StateDone:
		s.State = "Done."
	case rec.State == broker.StateInterrupted:
		s.State = "Stopped: a newer message took over."
	default:
		s.State = "This one didn't work out; the email about it says what to do."
	}
	if rec.Result != nil && rec.State == broker.StateDone {
		s.Summary = outbox.OwnerText(rec.Result.Summary)
	}
	s.Pictures = in.pictures(link, rec.Job.ID)
	return s
}

// pictures are a job's before/after pictures, by their URLs under the link.
func (in *Inbound) pictures(link threadLink, jobID string) []threadPicture {
	if in.cfg.Shots == nil {
		return nil
	}
	rep, err := in.cfg.Shots.Report(jobID)
	if err != nil {
		return nil
	}
	base := "/t/" + link.token + "/pictures/" + jobID + "/"
	var out []threadPicture
	for _, pg := range rep.Pages {
		for _, s := range pg.Shots {
			pic := threadPicture{Alt: s.Alt, After: base + url.PathEscape(cmpOr(s.Marked, s.After))}
			if s.Before != "" {
				pic.Before = base + url.PathEscape(s.Before)
			}
			out = append(out, pic)
		}
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// servePicture serves one picture of a job of link's thread: never of another thread's job.
func (in *Inbound) servePicture(w http.ResponseWriter, r *http.Request, link threadLink, rest string) {
	jobID, name, ok := strings.Cut(rest, "/")
	if !ok || in.cfg.Shots == nil || !strings.HasSuffix(name, ".png") {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	rec, err := in.cfg.Jobs.Get(r.Context(), jobID)
	if err != nil || rec.Job.Tenant != link.tenant || rec.Job.Thread != link.thread {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	path, err := in.cfg.Shots.Path(jobID, name)
	if err != nil {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Cache-Control", "private, max-age=3600")
	http.ServeContent(w, r, "", time.Time{}, f)
}

// errCrossSite: a POST that did not come from the thread page itself.
var errCrossSite = errors.New("this button only works from the page itself; open the link from your email again")

// sameSite reports whether a POST came from the thread page: the form's token matches the
// link's, and the browser (where it says) calls the request same-origin.
func (in *Inbound) sameSite(r *http.Request, link threadLink) bool {
	if !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(in.csrfToken(link.token))) {
		return false
	}
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return false
		}
	}
	return true
}

// threadAction publishes the thread or undoes its last publish, on behalf of its owner.
func (in *Inbound) threadAction(w http.ResponseWriter, r *http.Request, link threadLink, action string) {
	if !in.sameSite(r, link) {
		w.WriteHeader(http.StatusForbidden)
		_ = threadTemplate.Execute(w, threadPage{Error: strings.ToUpper(errCrossSite.Error()[:1]) + errCrossSite.Error()[1:] + "."})
		return
	}
	ctx := r.Context()
	recs, err := in.threadJobs(ctx, link)
	if err != nil || len(recs) == 0 {
		in.threadError(w, r, cmpErr(err, errThreadInvalid))
		return
	}
	var j jobspec.Spec // the newest by mail: the reply threads under the latest message
	for _, rec := range recs {
		if s := jobspec.Of(rec.Job); s.From != "" {
			j = s
		}
	}
	if j.From == "" {
		in.threadError(w, r, errThreadInvalid)
		return
	}
	act := jobspec.ActionPublish
	if action == "undo" {
		act = jobspec.ActionUndo
	}
	_, err = in.cfg.Router.Submit(ctx, router.Request{Project: recs[0].Job.Tenant.Project, User: recs[0].Job.Tenant.User, Thread: link.thread,
		Instruction: action + " (from the conversation's page)", From: j.From, Subject: j.Subject, MessageID: j.MessageID,
		References: j.References, Action: act})
	in.cfg.Logger.InfoContext(ctx, "thread page action", slog.String("action", action), slog.String("thread", link.thread), slog.Any("err", err))
	if err != nil {
		in.threadError(w, r, err)
		return
	}
	// Back to the page by GET, so that reloading it does not act again.
	http.Redirect(w, r, "/t/"+link.token+"?done="+action, http.StatusSeeOther)
}

// notices are what the page says after an action (its ?done=).
var notices = map[string]string{
	"publish": "Publishing. You'll get an email with the live address in a moment.",
	"undo":    "Undoing the last publish. You'll get an email when the live site is back.",
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}

// threadTemplate is the thread page, made for a phone first.
var threadTemplate = template.Must(template.New("thread").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
{{if .Running}}<meta http-equiv="refresh" content="15">{{end}}
<title>{{if .Error}}Link not valid{{else}}{{.Subject}}{{end}}</title>
<style>` + pageStyle + `</style></head>
<body><main>
{{if .Error}}<p class="error">{{.Error}}</p>{{else}}
<h1>{{.Subject}}</h1>
{{with .Notice}}<p class="notice">{{.}}</p>{{end}}
{{with .PreviewURL}}<p><a class="button" href="{{.}}" rel="noopener noreferrer">See the preview</a></p>{{end}}
{{with .LiveURL}}<p><a class="button secondary" href="{{.}}" rel="noopener noreferrer">See the live site</a></p>{{end}}
{{if .Publish}}<form method="post" action="/t/{{.Token}}/publish"><input type="hidden" name="csrf" value="{{.CSRF}}"><button type="submit">Publish: make it live</button></form>{{end}}
{{if .Undo}}<form method="post" action="/t/{{.Token}}/undo"><input type="hidden" name="csrf" value="{{.CSRF}}"><button type="submit" class="secondary">Undo the last publish</button></form>{{end}}
<h2>Your requests</h2>
{{range .Steps}}<section class="step">
<p class="instruction">{{.Instruction}}</p>
<p class="state">{{.State}}{{if not .Since.IsZero}} <span class="muted">({{.Since.UTC.Format "2 Jan 15:04 MST"}})</span>{{end}}</p>
{{with .Summary}}<p class="summary">{{.}}</p>{{end}}
{{range .Pictures}}<figure>{{with .Before}}<figcaption>Before</figcaption><a href="{{.}}"><img src="{{.}}" alt="Before the change"></a>{{end}}
<figcaption>After</figcaption><a href="{{.After}}"><img src="{{.After}}" alt="{{.Alt}}"></a></figure>{{end}}
</section>{{else}}<p>Nothing here yet.</p>{{end}}
{{if .Running}}<p class="muted">This page updates itself while I'm working.</p>{{end}}
{{end}}
</main></body></html>`))

// pageStyle is the owner pages' look: one column, big tap targets, nothing wider than a phone.
const pageStyle = `body{margin:0;font:17px/1.5 -apple-system,'Segoe UI',Helvetica,Arial,sans-serif;color:#1d1d1f;background:#f5f5f7}
main{max-width:36em;margin:0 auto;padding:1.2em 1em 3em}
h1{font-size:1.4em;line-height:1.25;margin:.2em 0 .8em;overflow-wrap:anywhere}
h2{font-size:1.1em;margin:1.8em 0 .6em}
a.button,button{display:block;box-sizing:border-box;width:100%;padding:.9em 1em;margin:.6em 0;border:0;border-radius:.6em;
background:#0a66d8;color:#fff;font:inherit;font-weight:600;text-align:center;text-decoration:none;cursor:pointer}
a.button.secondary,button.secondary{background:#fff;color:#0a66d8;box-shadow:inset 0 0 0 2px #0a66d8}
form{margin:0}
.step{background:#fff;border-radius:.8em;padding:.8em 1em;margin:.8em 0}
.instruction{white-space:pre-wrap;overflow-wrap:anywhere;font-weight:600;margin:.2em 0}
.summary{white-space:pre-wrap;overflow-wrap:anywhere}
.state{margin:.3em 0}.muted{color:#6e6e73}
.notice{background:#e3f4e8;border-radius:.6em;padding:.7em 1em}
.error{background:#fde8e8;border-radius:.6em;padding:.9em 1em}
figure{margin:.8em 0}figcaption{font-size:.9em;color:#6e6e73;margin:.4em 0 .2em}
img{display:block;max-width:100%;height:auto;border:1px solid #d2d2d7;border-radius:.4em}`
