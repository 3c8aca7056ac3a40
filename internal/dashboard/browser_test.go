package dashboard_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/capability/browsertest"
)

// browser starts a headless Chromium for the test and returns its first tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	return browsertest.Tab(t, chromedp.WindowSize(1440, 900))
}

// waitFor polls the page until the JavaScript expression is truthy, failing with the
// element sel's HTML after the deadline.
func waitFor(t *testing.T, tab context.Context, what, expr, sel string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 20*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(15*time.Second)))
	if err != nil {
		html, _ := chromedp.Run(tab, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {}).outerHTML || "(none)"`, sel)))
		t.Fatalf("waiting for %s: %v\n%s:\n%s", what, err, sel, html)
	}
}

func navigate(t *testing.T, tab context.Context, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible("main")); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
}

// TestBrowserLiveUpdates opens the overview in headless Chromium, then submits a job whose
// processor blocks until released, and sees without reloading: the tenant claimed by a
// worker, the job running, its live output on the job page (backlog, then new lines), and
// finally its result. It writes a full-page screenshot to $WO_SCREENSHOT.
func TestBrowserLiveUpdates(t *testing.T) {
	t.Parallel()
	f := setup(t, options{maxAttempts: 1})
	tab := browser(t) // closed before the server, so its streams end first
	background(t, f)

	navigate(t, tab, f.srv.URL+"/")
	mustEval(t, tab, `window.__notReloaded = true`)
	waitFor(t, tab, "the event stream to connect", `document.querySelector('#live.on') !== null`, "header")

	rec := f.submit("erin", "block: make the header <em>green</em>")
	row := fmt.Sprintf(`#jobs tr[data-job="%s"]`, rec.Job.ID)
	waitFor(t, tab, "the tenant claimed by a worker",
		`(r => !!r && r.dataset.owner.startsWith('test-w'))(document.querySelector('#tenants tr[data-tenant="site/erin"]'))`, "#tenants")
	waitFor(t, tab, "the job running", fmt.Sprintf(`document.querySelector('%s[data-state="running"]') !== null`, row), "#jobs")
	waitFor(t, tab, "a worker running the job", fmt.Sprintf(`document.querySelector('#workers tr[data-state="running"] a[href="/jobs/%s"]') !== null`, rec.Job.ID), "#workers")

	jobTab := openJobPage(t, f, rec)
	f.open()
	waitFor(t, tab, "the result on the overview", fmt.Sprintf(
		`(r => !!r && r.textContent.includes('Summary: did <block: make the header <em>green</em>>'))(document.querySelector('%s[data-state="done"]'))`, row), "#jobs")
	waitFor(t, jobTab, "the result on the job page",
		`(s => !!s && s.textContent.includes('Summary: did') && s.textContent.includes('index.html'))(document.querySelector('#job-result'))`, "#job-result")
	if ok, err := chromedp.Run(tab, chromedp.Evaluate[bool](`window.__notReloaded === true && document.querySelector('em') === null`)); err != nil || !ok {
		t.Errorf("the overview reloaded or rendered markup from an instruction (%v)", err)
	}
	screenshot(t, tab, screenshotPath())
	screenshot(t, jobTab, strings.TrimSuffix(screenshotPath(), ".png")+"-job.png")
	navigate(t, jobTab, f.srv.URL+"/dead")
	screenshot(t, jobTab, strings.TrimSuffix(screenshotPath(), ".png")+"-dead.png")
}

// background fills the overview with finished and dead jobs of other tenants.
func background(t *testing.T, f *fixture) {
	t.Helper()
	done := f.submit("frank", "Add the attached photo to the gallery\nand shrink it to 800px")
	dead := f.submit("gina", "fail: rebuild the whole site in Rust")
	f.waitState(done.Job.ID, broker.StateDone)
	f.waitState(dead.Job.ID, broker.StateDead)
}

// openJobPage opens the running job in a second browser and checks its output streams in:
// a line written before the page opened (the backlog), then one written after. (A second
// browser rather than a second tab: chromedp v0.22 loses replies on a second tab.)
func openJobPage(t *testing.T, f *fixture, rec broker.JobRecord) context.Context {
	t.Helper()
	jobTab := browser(t)
	fmt.Fprintf(f.hub.Writer(rec.Job.ID), "agent: reading index.html <script>bad()</script>\n")
	navigate(t, jobTab, f.srv.URL+"/jobs/"+rec.Job.ID)
	mustEval(t, jobTab, `window.__notReloaded = true`)
	waitFor(t, jobTab, "the output backlog", `document.querySelector('#output').textContent.includes('agent: reading index.html <script>bad()</script>')`, "#output")
	waitFor(t, jobTab, "the Interrupt button", `[...document.querySelectorAll('#job-state button')].some(b => b.textContent === 'Interrupt')`, "#job-state")
	fmt.Fprintf(f.hub.Writer(rec.Job.ID), "agent: edited styles.css\n")
	waitFor(t, jobTab, "a new output line", `document.querySelector('#output').textContent.includes('agent: edited styles.css')`, "#output")
	if ok, err := chromedp.Run(jobTab, chromedp.Evaluate[bool](`window.__notReloaded === true && document.querySelector('#output script') === null`)); err != nil || !ok {
		t.Errorf("the job page reloaded or rendered output as markup (%v)", err)
	}
	return jobTab
}

func mustEval(t *testing.T, tab context.Context, js string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 10*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](js)); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
}

func screenshotPath() string {
	if p := os.Getenv("WO_SCREENSHOT"); p != "" {
		return p
	}
	return filepath.Join(os.TempDir(), "webordinary-dashboard.png")
}

func screenshot(t *testing.T, tab context.Context, path string) {
	t.Helper()
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("write screenshot: %v", err)
	}
	t.Logf("screenshot: %s", path)
}
