package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/dashboard"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/tenant"
)

const xss = "<script>alert(1)</script>"

// TestPagesRenderAndEscape: the overview and the job page show a finished job with its
// result, and attacker-controlled text (instruction, summary, file names, details) arrives
// escaped; a javascript: preview link is neutralized.
func TestPagesRenderAndEscape(t *testing.T) {
	t.Parallel()
	f := setup(t, options{})
	rec := f.submit("alice", xss)
	f.waitState(rec.Job.ID, broker.StateDone)

	res, body := f.get("/")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /: %s\n%s", res.Status, body)
	}
	if !strings.Contains(res.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Errorf("no strict CSP: %q", res.Header.Get("Content-Security-Policy"))
	}
	for _, want := range []string{"Workers", "Tenants", "Recent jobs", "site/alice", rec.Job.ID,
		"&lt;script&gt;alert(1)&lt;/script&gt;", `data-state="done"`, "test-w1"} {
		if !strings.Contains(body, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
	assertNoRawXSS(t, "overview", body)

	res, body = f.get("/jobs/" + rec.Job.ID)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET job: %s\n%s", res.Status, body)
	}
	for _, want := range []string{"Timeline", "Accepted", "Started", "Finished", "Files changed", "index.html",
		"&lt;img src=x&gt;.png", "2 files changed", "$0.0123", "Model service retries", "2 (waited 3s)", "Check turn", "fixed a miss: made the header green", "0123456789", "thread-t1", "http://edit.site.localhost:8080/",
		"Summary: did &lt;&lt;script&gt;", "&lt;i&gt;x&lt;/i&gt;", "agent: working on " + rec.Job.ID, "lease token #",
		"Network refused", "&lt;script&gt;evil.example:443", "host not allowed", "3×", "Model tokens", "1200 in, 345 out"} {
		if !strings.Contains(body, want) {
			t.Errorf("job page lacks %q", want)
		}
	}
	if strings.Contains(body, `href="javascript:`) {
		t.Error("job page links a javascript: URL")
	}
	assertNoRawXSS(t, "job page", body)
}

func assertNoRawXSS(t *testing.T, page, body string) {
	t.Helper()
	for _, bad := range []string{xss, "<img src=x>", "<b>badly</b>", "<i>x</i>"} {
		if strings.Contains(body, bad) {
			t.Errorf("%s contains unescaped %q", page, bad)
		}
	}
}

// TestTokenRequired: with a token, every route answers 401 without it; a bearer header or
// a cookie set by one ?token= visit lets the request in.
func TestTokenRequired(t *testing.T) {
	t.Parallel()
	f := setup(t, options{token: "s3cret"})
	cases := []struct {
		name   string
		path   string
		header []string
		want   int
	}{
		{"no token", "/", nil, http.StatusUnauthorized},
		{"no token, events", "/events", nil, http.StatusUnauthorized},
		{"no token, dead", "/dead", nil, http.StatusUnauthorized},
		{"no token, static", "/static/app.js", nil, http.StatusUnauthorized},
		{"wrong bearer", "/", []string{"Authorization", "Bearer nope"}, http.StatusUnauthorized},
		{"wrong query", "/?token=nope", nil, http.StatusUnauthorized},
		{"bearer", "/", []string{"Authorization", "Bearer s3cret"}, http.StatusOK},
		{"bearer, dead", "/dead", []string{"Authorization", "Bearer s3cret"}, http.StatusOK},
		{"query", "/dead?token=s3cret", nil, http.StatusSeeOther},
	}
	for _, c := range cases {
		if res, _ := f.get(c.path, c.header...); res.StatusCode != c.want {
			t.Errorf("%s: GET %s = %d, want %d", c.name, c.path, res.StatusCode, c.want)
		}
	}

	res, _ := f.get("/dead?token=s3cret&x=1")
	if loc := res.Header.Get("Location"); loc != "/dead?x=1" {
		t.Errorf("?token= redirects to %q, want the same URL without the token", loc)
	}
	cookie := sessionCookie(t, res)
	if !cookie.HttpOnly || cookie.Value == "s3cret" {
		t.Errorf("session cookie %+v: want HttpOnly and not the token itself", cookie)
	}
	if res, _ := f.get("/", "Cookie", cookie.String()); res.StatusCode != http.StatusOK {
		t.Errorf("with the session cookie: %s", res.Status)
	}
	if res, _ := f.get("/", "Cookie", "webordinary_dashboard=forged"); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("with a forged cookie: %s", res.Status)
	}
}

func sessionCookie(t *testing.T, res *http.Response) *http.Cookie {
	t.Helper()
	for _, c := range res.Cookies() {
		if c.Name == "webordinary_dashboard" {
			return c
		}
	}
	t.Fatalf("no session cookie in %v", res.Header)
	return nil
}

// TestLoopbackOnlyWithoutToken: without a token only loopback names are served, so a
// DNS-rebinding page cannot read the dashboard.
func TestLoopbackOnlyWithoutToken(t *testing.T) {
	t.Parallel()
	f := setup(t, options{})
	for host, want := range map[string]int{"evil.example": http.StatusForbidden, "localhost": http.StatusOK,
		"127.0.0.1:1234": http.StatusOK, "[::1]:80": http.StatusOK, "app.localhost": http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/", nil)
		req.Host = host
		if res, _ := f.do(req); res.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, res.StatusCode, want)
		}
	}
}

// TestCSRF: a POST without this process's form token, or with another, is refused and does
// nothing; with it, the action runs and redirects back (or answers a fetch with 204).
func TestCSRF(t *testing.T) {
	t.Parallel()
	f := setup(t, options{})
	rec := f.submit("alice", "block until the test ends")
	f.waitState(rec.Job.ID, broker.StateRunning)
	token := f.csrf("/jobs/" + rec.Job.ID)
	path := "/tenants/site/alice/release"
	cases := []struct {
		name   string
		form   url.Values
		header []string
		want   int
	}{
		{"no token", url.Values{}, nil, http.StatusForbidden},
		{"wrong token", url.Values{"csrf": {"00"}}, nil, http.StatusForbidden},
		{"wrong header", url.Values{}, []string{"X-CSRF-Token", "00"}, http.StatusForbidden},
		{"cross-site", url.Values{"csrf": {token}}, []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"form", url.Values{"csrf": {token}, "back": {"/jobs/" + rec.Job.ID}}, nil, http.StatusSeeOther},
		{"fetch", url.Values{}, []string{"X-CSRF-Token", token}, http.StatusNoContent},
	}
	for _, c := range cases {
		if res, body := f.post(path, c.form, c.header...); res.StatusCode != c.want {
			t.Errorf("%s: POST %s = %d, want %d\n%s", c.name, path, res.StatusCode, c.want, body)
		}
	}
}

// TestRedirectStaysOnSite: the back field cannot send the browser elsewhere.
func TestRedirectStaysOnSite(t *testing.T) {
	t.Parallel()
	f := setup(t, options{})
	rec := f.submit("alice", "block")
	f.waitState(rec.Job.ID, broker.StateRunning)
	token := f.csrf("/jobs/" + rec.Job.ID)
	for back, want := range map[string]string{"//evil.example/": "/", "https://evil.example/": "/",
		"/\\evil.example": "/", "/jobs/" + rec.Job.ID: "/jobs/" + rec.Job.ID} {
		res, _ := f.post("/tenants/site/alice/release", url.Values{"csrf": {token}, "back": {back}})
		if loc := res.Header.Get("Location"); loc != want {
			t.Errorf("back %q redirects to %q, want %q", back, loc, want)
		}
	}
}

// TestInterrupt: the job page of a running job offers Interrupt; posting it stops the job.
func TestInterrupt(t *testing.T) {
	t.Parallel()
	f := setup(t, options{})
	rec := f.submit("alice", "block until interrupted")
	f.waitState(rec.Job.ID, broker.StateRunning)
	_, body := f.get("/jobs/" + rec.Job.ID)
	if !strings.Contains(body, "Interrupt</button>") {
		t.Fatalf("running job page has no Interrupt button:\n%s", body)
	}
	token := f.csrf("/jobs/" + rec.Job.ID)
	res, body := f.post("/jobs/"+rec.Job.ID+"/interrupt", url.Values{"csrf": {token}, "back": {"/jobs/" + rec.Job.ID}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/jobs/"+rec.Job.ID {
		t.Fatalf("interrupt: %s %s\n%s", res.Status, res.Header.Get("Location"), body)
	}
	f.waitState(rec.Job.ID, broker.StateInterrupted)
	if _, body = f.get("/jobs/" + rec.Job.ID); strings.Contains(body, "Interrupt</button>") {
		t.Error("an interrupted job still offers Interrupt")
	}
}

// TestRelease: Release makes the owner give the tenant up after its running job; without it
// the owner keeps the idle tenant (IdleRelease is 30 minutes).
func TestRelease(t *testing.T) {
	t.Parallel()
	f := setup(t, options{})
	rec := f.submit("alice", "block until released")
	f.waitState(rec.Job.ID, broker.StateRunning)
	_, body := f.get("/")
	if !strings.Contains(body, "Release</button>") {
		t.Fatalf("owned tenant has no Release button:\n%s", body)
	}
	token := f.csrf("/")
	if res, body := f.post("/tenants/site/alice/release", url.Values{"csrf": {token}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("release: %s\n%s", res.Status, body)
	}
	f.open()
	f.waitState(rec.Job.ID, broker.StateDone)
	tn, _ := tenant.New("site", "alice")
	eventually(t, 10*time.Second, "the tenant's lease to be released", func() bool {
		_, err := f.env.Backend.Leases.Get(context.Background(), tn)
		return errors.Is(err, broker.ErrNotFound)
	})
	if res, _ := f.post("/tenants/site/Not_Valid/release", url.Values{"csrf": {token}}); res.StatusCode != http.StatusBadRequest {
		t.Errorf("release of an invalid tenant: %s", res.Status)
	}
}

// TestJobPageShowsFailureKind: a failed job's page says its failure's kind, as the processor's
// error carried it, and whose it is to fix.
func TestJobPageShowsFailureKind(t *testing.T) {
	t.Parallel()
	f := setup(t, options{maxAttempts: 1})
	rec := f.submit("bob", "fail now")
	f.waitState(rec.Job.ID, broker.StateDead)
	res, body := f.get("/jobs/" + rec.Job.ID)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "<dt>Failure</dt>") ||
		!strings.Contains(body, "save (the operator's to fix)") {
		t.Fatalf("the job page does not say the failure's kind:\n%s", body)
	}
}

// TestDeadLetters: a job that always fails (MaxAttempts 1) is listed under /dead; Retry
// submits it again as a new job and removes the dead letter; Discard removes one.
func TestDeadLetters(t *testing.T) {
	t.Parallel()
	f := setup(t, options{maxAttempts: 1})
	tn, _ := tenant.New("site", "bob")
	rec := f.submit("bob", "fail "+xss)
	f.waitState(rec.Job.ID, broker.StateDead)
	waitDeadLetter(t, f, tn, rec.Job.ID)

	res, body := f.get("/dead")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, rec.Job.ID) || !strings.Contains(body, "site/bob") {
		t.Fatalf("/dead does not list %s:\n%s", rec.Job.ID, body)
	}
	assertNoRawXSS(t, "/dead", body)
	token := f.csrf("/dead")

	retried := retry(t, f, token, rec)
	if letters := deadLetters(t, f, tn); containsJob(letters, rec.Job.ID) {
		t.Errorf("the retried dead letter is still there: %+v", letters)
	}
	f.waitState(retried.Job.ID, broker.StateDead) // it still fails, and dies again
	waitDeadLetter(t, f, tn, retried.Job.ID)

	path := fmt.Sprintf("/dead/site/bob/%s/discard", retried.Job.ID)
	if res, body := f.post(path, url.Values{"csrf": {token}, "back": {"/dead"}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("discard: %s\n%s", res.Status, body)
	}
	if letters := deadLetters(t, f, tn); len(letters) != 0 {
		t.Errorf("dead letters left after discard: %+v", letters)
	}
	if res, _ := f.post(path, url.Values{"csrf": {token}}); res.StatusCode != http.StatusNotFound {
		t.Errorf("discarding a gone dead letter: %s, want 404", res.Status)
	}
	if _, body := f.get("/dead"); !strings.Contains(body, "No dead letters.") {
		t.Errorf("/dead after discard:\n%s", body)
	}
}

// retry posts Retry for rec and returns the new job, checking it carries the same content.
func retry(t *testing.T, f *fixture, token string, rec broker.JobRecord) broker.JobRecord {
	t.Helper()
	path := fmt.Sprintf("/dead/site/bob/%s/retry", rec.Job.ID)
	res, body := f.post(path, url.Values{"csrf": {token}, "back": {"/dead"}})
	loc, _ := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != http.StatusSeeOther || loc == nil || loc.Path != "/dead" {
		t.Fatalf("retry: %s %v\n%s", res.Status, loc, body)
	}
	id := loc.Query().Get("retried")
	newRec, err := f.env.Backend.Jobs.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("retried job %q: %v", id, err)
	}
	if id == rec.Job.ID || jobspec.Of(newRec.Job).Instruction != jobspec.Of(rec.Job).Instruction || newRec.Job.Thread != rec.Job.Thread ||
		jobspec.Of(newRec.Job).From != jobspec.Of(rec.Job).From {
		t.Errorf("retry made %+v from %+v", newRec.Job, rec.Job)
	}
	if _, body := f.get(loc.String()); !strings.Contains(body, "Re-submitted as job") {
		t.Error("no notice of the retry on /dead")
	}
	return newRec
}

func waitDeadLetter(t *testing.T, f *fixture, tn tenant.ID, id string) {
	t.Helper()
	eventually(t, 10*time.Second, "dead letter "+id, func() bool { return containsJob(deadLetters(t, f, tn), id) })
}

func deadLetters(t *testing.T, f *fixture, tn tenant.ID) []broker.DeadLetter {
	t.Helper()
	letters, err := f.env.Backend.Inbox.DeadLetters(context.Background(), tn)
	if err != nil {
		t.Fatal(err)
	}
	return letters
}

func containsJob(letters []broker.DeadLetter, id string) bool {
	for _, dl := range letters {
		if dl.Job.ID == id {
			return true
		}
	}
	return false
}

// TestNotFound: unknown jobs and malformed ids get a 404 page that escapes the id.
func TestNotFound(t *testing.T) {
	t.Parallel()
	f := setup(t, options{})
	for _, path := range []string{"/jobs/j000000000000000000000000", "/jobs/" + url.PathEscape(xss), "/nope"} {
		res, body := f.get(path)
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s", path, res.Status)
		}
		assertNoRawXSS(t, path, body)
	}
}

// TestOverviewEvents: the overview's event stream sends its sections, then a new job's row
// as the job appears and finishes, without a reload.
func TestOverviewEvents(t *testing.T) {
	t.Parallel()
	f := setup(t, options{})
	ch := f.events("/events")
	awaitEvent(t, ch, "the workers section", func(ev event) bool {
		id, html := swapOf(ev)
		return id == "workers" && strings.Contains(html, "test-w1")
	})
	rec := f.submit("carol", "block for the event test")
	awaitEvent(t, ch, "the job running", func(ev event) bool {
		id, html := swapOf(ev)
		return id == "jobs" && strings.Contains(html, `data-job="`+rec.Job.ID+`" data-state="running"`)
	})
	f.open()
	awaitEvent(t, ch, "the job done", func(ev event) bool {
		id, html := swapOf(ev)
		return id == "jobs" && strings.Contains(html, `data-job="`+rec.Job.ID+`" data-state="done"`)
	})
}

// TestJobEventsStreamOutput: a job page's stream sends the output backlog, then new lines,
// then the final state, then "end".
func TestJobEventsStreamOutput(t *testing.T) {
	t.Parallel()
	f := setup(t, options{})
	rec := f.submit("dave", "block for the output test")
	f.waitState(rec.Job.ID, broker.StateRunning)
	fmt.Fprintf(f.hub.Writer(rec.Job.ID), "backlog <b>line</b>\n")
	ch := f.events("/jobs/" + rec.Job.ID + "/events")
	awaitEvent(t, ch, "the backlog", func(ev event) bool {
		return ev.Name == "reset" && strings.Contains(ev.Data, `backlog \u003cb\u003eline\u003c/b\u003e`)
	})
	fmt.Fprintf(f.hub.Writer(rec.Job.ID), "a new line\n")
	awaitEvent(t, ch, "the new line", func(ev event) bool { return ev.Name == "lines" && strings.Contains(ev.Data, "a new line") })
	f.open()
	awaitEvent(t, ch, "the result", func(ev event) bool {
		id, html := swapOf(ev)
		return id == "job-result" && strings.Contains(html, "Summary: did")
	})
	awaitEvent(t, ch, "end", func(ev event) bool { return ev.Name == "end" })
}

// TestNewValidates: New says what is missing.
func TestNewValidates(t *testing.T) {
	t.Parallel()
	if _, err := dashboard.New(dashboard.Config{}); err == nil || !strings.Contains(err.Error(), "backend") {
		t.Errorf("New without a backend: %v", err)
	}
}

// TestStatic: the two assets are served with their types; nothing else is, not even a listing.
func TestStatic(t *testing.T) {
	t.Parallel()
	f := setup(t, options{})
	for path, want := range map[string]string{"/static/app.js": "javascript", "/static/style.css": "text/css"} {
		res, body := f.get(path)
		if res.StatusCode != http.StatusOK || !strings.Contains(res.Header.Get("Content-Type"), want) || body == "" {
			t.Errorf("GET %s: %s %s", path, res.Status, res.Header.Get("Content-Type"))
		}
	}
	for _, path := range []string{"/static/", "/static/nope.js", "/static/layout.html"} {
		if res, _ := f.get(path); res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", path, res.Status)
		}
	}
}

// TestGuard: Guard puts another handler (the JSON API) behind the same Host check, token
// and cross-origin protection; GuardHost checks only the Host.
func TestGuard(t *testing.T) {
	t.Parallel()
	f := setup(t, options{})
	d, err := dashboard.New(dashboard.Config{Backend: f.env.Backend, Router: f.router, Token: "s3cret",
		Hosts: []string{"edit.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	teapot := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	api, health := d.Guard(teapot), d.GuardHost(teapot)
	cases := []struct {
		name, method, host, auth string
		headers                  []string
		h                        http.Handler
		want                     int
	}{
		{"no token", http.MethodGet, "127.0.0.1:8080", "", nil, api, http.StatusUnauthorized},
		{"wrong token", http.MethodGet, "127.0.0.1:8080", "Bearer nope", nil, api, http.StatusUnauthorized},
		{"token", http.MethodGet, "127.0.0.1:8080", "Bearer s3cret", nil, api, http.StatusTeapot},
		{"public host", http.MethodPost, "EDIT.example.com.", "Bearer s3cret", nil, api, http.StatusTeapot},
		{"rebound host with token", http.MethodGet, "evil.example:8080", "Bearer s3cret", nil, api, http.StatusForbidden},
		{"cross-site POST", http.MethodPost, "localhost:8080", "Bearer s3cret", []string{"Sec-Fetch-Site", "cross-site"}, api, http.StatusForbidden},
		{"foreign Origin POST", http.MethodPost, "localhost:8080", "Bearer s3cret", []string{"Origin", "http://evil.example"}, api, http.StatusForbidden},
		{"foreign Origin GET", http.MethodGet, "localhost:8080", "Bearer s3cret", []string{"Origin", "http://evil.example"}, api, http.StatusTeapot},
		{"health without token", http.MethodGet, "localhost", "", nil, health, http.StatusTeapot},
		{"health on a rebound host", http.MethodGet, "evil.example", "", nil, health, http.StatusForbidden},
	}
	for _, tc := range cases {
		req := httptest.NewRequest(tc.method, "/api/status", nil)
		req.Host = tc.host
		req.Header.Set("Authorization", tc.auth)
		for i := 0; i+1 < len(tc.headers); i += 2 {
			req.Header.Set(tc.headers[i], tc.headers[i+1])
		}
		rec := httptest.NewRecorder()
		tc.h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, rec.Code, tc.want)
		}
	}
}

// TestModelBusyShows: a running job waiting for a busy model service says so, and since when,
// on the overview and on its page.
func TestModelBusyShows(t *testing.T) {
	t.Parallel()
	f := setup(t, options{})
	defer f.open()
	rec := f.submit("alice", "block until the model answers")
	f.waitState(rec.Job.ID, broker.StateRunning)
	since := time.Now().Add(-2 * time.Minute).UTC().Truncate(time.Second)
	if _, err := f.env.Backend.Jobs.Update(context.Background(), rec.Job.ID, func(r *broker.JobRecord) error {
		r.BusySince = since
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := "waiting for the model service (busy: 429/529)"
	for _, path := range []string{"/", "/jobs/" + rec.Job.ID} {
		if _, body := f.get(path); !strings.Contains(body, want) || !strings.Contains(body, since.Format(time.RFC3339)) {
			t.Errorf("%s does not say the job waits for the model service since %s", path, since.Format(time.RFC3339))
		}
	}
}
