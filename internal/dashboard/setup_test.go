package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/broker/natsjs/natsjstest"
	"github.com/webordinary/webordinary/internal/dashboard"
	"github.com/webordinary/webordinary/internal/failure"
	"github.com/webordinary/webordinary/internal/jobspec"
	"github.com/webordinary/webordinary/internal/live"
	"github.com/webordinary/webordinary/internal/pipeline/report"
	"github.com/webordinary/webordinary/internal/router"
	"github.com/webordinary/webordinary/internal/worker"
)

// fixture is one test's engine, router, worker pool, hub and dashboard server.
type fixture struct {
	t      *testing.T
	env    *natsjstest.Env
	router *router.Router
	hub    *live.Hub
	srv    *httptest.Server
	// gate holds every job whose instruction starts with "block" until closed.
	gate     chan struct{}
	gateOnce sync.Once
}

type options struct {
	token       string
	maxAttempts int
	quarantine  dashboard.Quarantine
	held        dashboard.Held
	replies     dashboard.Replies
}

func setup(t *testing.T, opts options) *fixture {
	t.Helper()
	f := &fixture{t: t, env: natsjstest.Start(t, natsjstest.Options{NoSync: true}), hub: live.NewHub(0),
		gate: make(chan struct{})}
	t.Cleanup(f.open)
	f.startRouter()
	pool := f.startPool(opts.maxAttempts)
	d, err := dashboard.New(dashboard.Config{Backend: f.env.Backend, Router: f.router, Live: f.hub,
		Local: pool.Status, Token: opts.token, Quarantine: opts.quarantine, Held: opts.held, Replies: opts.replies, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(d.Handler())
	t.Cleanup(func() { f.srv.CloseClientConnections(); f.srv.Close() })
	return f
}

func (f *fixture) startRouter() {
	r, err := router.New(router.Config{Backend: f.env.Backend, ReconcileEvery: 200 * time.Millisecond,
		RepeatClaimAfter: time.Second, Logger: testLogger(f.t)})
	if err != nil {
		f.t.Fatal(err)
	}
	f.router = r
	f.run(r.Run)
}

func (f *fixture) startPool(maxAttempts int) *worker.Pool {
	_, b := natsjstest.Connect(f.t, f.env)
	p, err := worker.New(worker.Config{Backend: b, Processor: f.processor(), Workers: 2, Process: "test",
		LeaseTTL: leaseTTL, RetryBackoff: 50 * time.Millisecond, MaxAttempts: maxAttempts,
		ShutdownGrace: 100 * time.Millisecond, Logger: testLogger(f.t)})
	if err != nil {
		f.t.Fatal(err)
	}
	f.run(p.Run)
	return p
}

// leaseTTL is long enough that no lease renewal happens during a test: a renewal while a job
// runs trips the race detector in internal/worker (ownership.renew writes o.lease under o.mu;
// job.go reads o.lease.Token without it), which is not this package's to fix.
const leaseTTL = 30 * time.Second

// run runs fn until the end of the test.
func (f *fixture) run(fn func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = fn(ctx) }()
	f.t.Cleanup(func() { cancel(); <-done })
}

// open releases every blocked job.
func (f *fixture) open() { f.gateOnce.Do(func() { close(f.gate) }) }

// errAlways is of kind Save, though its text speaks of the build: the kind is the error's,
// never read from its words.
var errAlways = failure.Mark(failure.Save, errors.New("the site's build is broken <b>badly</b>"))

// processor: "fail…" always fails; "block…" writes output and waits for the gate (or an
// interrupt); anything else is done at once. Results carry pipeline-like details.
func (f *fixture) processor() worker.Processor {
	return worker.ProcessorFunc(func(ctx context.Context, task worker.Task) (worker.Outcome, error) {
		out := f.hub.Writer(task.Job.ID)
		fmt.Fprintf(out, "agent: working on %s\n", task.Job.ID)
		switch {
		case strings.HasPrefix(jobspec.Of(task.Job).Instruction, "fail"):
			return worker.Outcome{}, errAlways
		case strings.HasPrefix(jobspec.Of(task.Job).Instruction, "block"):
			select {
			case <-f.gate:
			case <-ctx.Done():
				return worker.Outcome{Report: report.Report{Interrupted: true}}, context.Cause(ctx)
			}
		}
		return outcome(task), nil
	})
}

func outcome(task worker.Task) worker.Outcome {
	return worker.Outcome{Summary: "Summary: did <" + jobspec.Of(task.Job).Instruction + ">", Report: report.Report{
		Files:         []report.FileChange{{Status: "M", Path: "index.html"}, {Status: "A", Path: "<img src=x>.png"}},
		Diffstat:      " 2 files changed, 3 insertions(+) <i>x</i>",
		PreviewURLs:   []string{"http://edit.site.localhost:8080/", "javascript:alert(1)"},
		Branch:        "thread-" + task.Job.Thread,
		Commit:        "0123456789abcdef0123456789abcdef01234567",
		AgentCostUSD:  0.0123,
		AgentTurns:    4,
		ModelRetries:  2,
		ModelWait:     3 * time.Second,
		Check:         &report.Check{Pictures: 2, Changed: true, Summary: "made the header green"},
		StagesMs:      map[string]int64{"git": 12, "agent": 900, "build": 300, "push": 40},
		EgressDenied:  []report.EgressDenial{{Target: "<script>evil.example:443", Reason: "host not allowed", Count: 3}},
		ModelTokensIn: 1200, ModelTokensOut: 345,
	}}
}

func (f *fixture) submit(user, instruction string) broker.JobRecord {
	f.t.Helper()
	rec, err := f.router.Submit(context.Background(), router.Request{Project: "site", User: user, Thread: "t1",
		Instruction: instruction, From: "owner@example.com", Subject: "Edit"})
	if err != nil {
		f.t.Fatalf("submit: %v", err)
	}
	return rec
}

// waitJob waits until the job's record satisfies until.
func (f *fixture) waitJob(id string, what string, until func(broker.JobRecord) bool) broker.JobRecord {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rec, err := f.env.Backend.Jobs.Wait(ctx, id, until)
	if err != nil {
		cur, _ := f.env.Backend.Jobs.Get(context.Background(), id)
		f.t.Fatalf("job %s never %s: %v (state %s)", id, what, err, cur.State)
	}
	return rec
}

func (f *fixture) waitState(id string, s broker.State) broker.JobRecord {
	f.t.Helper()
	return f.waitJob(id, "became "+string(s), func(r broker.JobRecord) bool { return r.State == s })
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// client is an HTTP client that does not follow redirects, so tests see them.
var client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (f *fixture) get(path string, header ...string) (*http.Response, string) {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.srv.URL+path, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return f.do(req)
}

func (f *fixture) post(path string, form url.Values, header ...string) (*http.Response, string) {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return f.do(req)
}

func (f *fixture) do(req *http.Request) (*http.Response, string) {
	f.t.Helper()
	res, err := client.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return res, string(body)
}

var csrfPattern = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrf reads the form token from a page that has a form.
func (f *fixture) csrf(page string, header ...string) string {
	f.t.Helper()
	_, body := f.get(page, header...)
	m := csrfPattern.FindStringSubmatch(body)
	if m == nil {
		f.t.Fatalf("no csrf field on %s:\n%s", page, body)
	}
	return m[1]
}

// event is one Server-Sent Event.
type event struct {
	Name string
	Data string
}

// events opens an event stream; it is closed at the end of the test.
func (f *fixture) events(path string) <-chan event {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+path, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	if ct := res.Header.Get("Content-Type"); res.StatusCode != http.StatusOK || ct != "text/event-stream" {
		f.t.Fatalf("GET %s: %s %s", path, res.Status, ct)
	}
	ch := make(chan event, 100)
	done := make(chan struct{})
	go func() { defer close(done); readEvents(res.Body, ch) }()
	f.t.Cleanup(func() { cancel(); res.Body.Close(); <-done })
	return ch
}

func readEvents(r io.Reader, ch chan<- event) {
	defer close(ch)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	var ev event
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Name != "" {
				ch <- ev
			}
			ev = event{}
		case strings.HasPrefix(line, "event: "):
			ev.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.Data += strings.TrimPrefix(line, "data: ")
		}
	}
}

// awaitEvent reads events until match accepts one.
func awaitEvent(t *testing.T, ch <-chan event, what string, match func(event) bool) event {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("event stream ended before %s", what)
			}
			if match(ev) {
				return ev
			}
		case <-timeout:
			t.Fatalf("no event: %s", what)
		}
	}
}

// swapOf decodes a "swap" event.
func swapOf(ev event) (id, html string) {
	var s struct{ ID, HTML string }
	if ev.Name != "swap" || json.Unmarshal([]byte(ev.Data), &s) != nil {
		return "", ""
	}
	return s.ID, s.HTML
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
