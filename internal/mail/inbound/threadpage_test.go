package inbound_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/mail/inbound"
	"github.com/webordinary/webordinary/internal/pipeline/report"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/shots"
	"github.com/webordinary/webordinary/internal/tenant"
)

// pageFixture is a mail router whose thread pages are served over HTTP.
type pageFixture struct {
	*fixture
	srv    *httptest.Server
	offset *atomic.Int64 // the router's clock runs ahead of the real one by this much
}

func setupPages(t *testing.T) pageFixture {
	t.Helper()
	var base atomic.Value
	base.Store("")
	offset := new(atomic.Int64)
	f := setupWith(t, func(c *inbound.Config) {
		c.LinkBase = func() string { return base.Load().(string) }
		c.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
		c.LinkTTL = time.Hour
		c.Shots = &shots.Store{Dir: t.TempDir()}
	})
	mux := http.NewServeMux()
	mux.Handle("/t/", f.in.ThreadHandler())
	mux.Handle("/publish/", f.in.PublishHandler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	base.Store(srv.URL)
	return pageFixture{f, srv, offset}
}

var threadLinkRE = regexp.MustCompile(`Everything about this request: (\S+)`)

// doneThread sends an instruction from sender, finishes its job with a preview and returns
// the job's record and the thread link of its reply.
func (p pageFixture) doneThread(sender, domain, id, instruction string, headers ...string) (broker.JobRecord, string) {
	p.t.Helper()
	ctx := context.Background()
	rep := p.handle(p.mail(sender, "edit@edit.example.net", id, strings.Join(headers, ""), instruction, domain), sender)
	if rep.JobID == "" {
		p.t.Fatalf("no job: %+v", rep.Decision)
	}
	res := broker.Result{JobID: rep.JobID, State: broker.StateDone, Summary: "Done: " + instruction,
		Details: report.Report{PreviewURLs: []string{"http://" + rep.Thread.Thread + ".edit.site.example/"}}.Encode()}
	rec, err := p.b.Jobs.Update(ctx, rep.JobID, func(r *broker.JobRecord) error {
		r.State, r.Result = broker.StateDone, &res
		return nil
	})
	if err != nil {
		p.t.Fatal(err)
	}
	if err := p.in.OnResult(ctx, res); err != nil {
		p.t.Fatal(err)
	}
	m := threadLinkRE.FindStringSubmatch(p.replyTo(id))
	if m == nil {
		p.t.Fatalf("the reply to %s has no thread link", id)
	}
	return rec, m[1]
}

func (p pageFixture) get(u string) (int, string) {
	p.t.Helper()
	res, err := http.Get(u)
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func (p pageFixture) post(u string, form url.Values, header map[string]string) (int, string) {
	p.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// TestThreadLinkSeesOnlyItsThread: a thread link shows its own thread's instructions and
// preview and nothing of another thread of the same owner or of another tenant; its token
// cannot be bent to another thread, nor its pictures route to another thread's job.
func TestThreadLinkSeesOnlyItsThread(t *testing.T) {
	t.Parallel()
	p := setupPages(t)
	a, linkA := p.doneThread("alice@example.com", "example.com", "a1@example.com", "Make the header green.")
	c, _ := p.doneThread("alice@example.com", "example.com", "c1@example.com", "Add a contact page.")
	b, linkB := p.doneThread("bob@bob.example", "bob.example", "b1@bob.example", "Fix the typo on the menu.")
	if a.Job.Thread == c.Job.Thread || a.Job.Tenant == b.Job.Tenant {
		t.Fatalf("threads not apart: %s %s %s", a.Job.Thread, c.Job.Thread, b.Job.Tenant)
	}
	status, body := p.get(linkA)
	if status != 200 || !strings.Contains(body, "Make the header green.") || !strings.Contains(body, "http://"+a.Job.Thread+".edit.site.example/") {
		t.Fatalf("thread A's page (%d):\n%s", status, body)
	}
	for _, other := range []string{"Add a contact page.", "Fix the typo", c.Job.Thread, b.Job.Thread, "api-token", "?token="} {
		if strings.Contains(body, other) {
			t.Errorf("thread A's page shows %q", other)
		}
	}
	// Bend A's token to B: swap the thread in the payload, or graft B's signature on it.
	tokA, tokB := strings.TrimPrefix(linkA, p.srv.URL+"/t/"), strings.TrimPrefix(linkB, p.srv.URL+"/t/")
	payA, macA, _ := strings.Cut(tokA, ".")
	payB, macB, _ := strings.Cut(tokB, ".")
	for name, tok := range map[string]string{"A's payload, B's signature": payA + "." + macB, "B's payload, A's signature": payB + "." + macA,
		"no signature": payA, "garbage": "x.y"} {
		if status, body := p.get(p.srv.URL + "/t/" + tok); status != http.StatusForbidden || !strings.Contains(body, "not valid") || strings.Contains(body, "Fix the typo") {
			t.Errorf("%s: %d\n%s", name, status, body)
		}
	}
	// A's link reaching for B's job's pictures, or acting from B's page, gets nothing.
	if status, _ := p.get(linkA + "/pictures/" + b.Job.ID + "/p1-phone-after.png"); status != http.StatusNotFound {
		t.Errorf("A's link served B's picture: %d", status)
	}
	if _, err := p.cfg.Threads.Update(context.Background(), b.Job.Thread, func(th *project.Thread) {
		th.Built = &project.Built{Tree: "t", Version: "1", Job: b.Job.ID}
	}); err != nil {
		t.Fatal(err)
	}
	_, bodyB := p.get(linkB)
	csrfB := csrfRE.FindStringSubmatch(bodyB)
	if csrfB == nil {
		t.Fatalf("B's page has no form token:\n%s", bodyB)
	}
	if status, _ := p.post(linkA+"/undo", url.Values{"csrf": {csrfB[1]}}, nil); status != http.StatusForbidden {
		t.Errorf("A's link took B's form token: %d", status)
	}
}

// TestThreadLinkExpiredRevokedAndCrossSite: an expired or revoked link gets a plain refusal
// page; a POST from another site, or without the page's form token, does nothing; one from
// the page itself queues the undo on the thread.
func TestThreadLinkExpiredRevokedAndCrossSite(t *testing.T) {
	t.Parallel()
	p := setupPages(t)
	a, link := p.doneThread("alice@example.com", "example.com", "a1@example.com", "Make the header green.")
	if _, err := p.cfg.Threads.Update(context.Background(), a.Job.Thread, func(th *project.Thread) {
		th.Publishes = append(th.Publishes, project.Publish{Job: "j1", URL: "http://site.example/"})
	}); err != nil {
		t.Fatal(err)
	}
	_, body := p.get(link)
	m := csrfRE.FindStringSubmatch(body)
	if m == nil || !strings.Contains(body, "Undo the last publish") || !strings.Contains(body, "http://site.example/") {
		t.Fatalf("the page offers no undo of the live publish:\n%s", body)
	}
	form := url.Values{"csrf": {m[1]}}
	queued := p.pending("alice")
	for name, h := range map[string]map[string]string{
		"cross-site":     {"Sec-Fetch-Site": "cross-site"},
		"same-site":      {"Sec-Fetch-Site": "same-site"},
		"foreign origin": {"Origin": "https://evil.example"},
		"null origin":    {"Origin": "null"},
	} {
		if status, body := p.post(link+"/undo", form, h); status != http.StatusForbidden || !strings.Contains(body, "only works from the page itself") {
			t.Errorf("%s POST: %d\n%s", name, status, body)
		}
	}
	if status, _ := p.post(link+"/undo", url.Values{}, map[string]string{"Sec-Fetch-Site": "same-origin"}); status != http.StatusForbidden {
		t.Errorf("POST without the form token: %d", status)
	}
	if n := p.pending("alice") - queued; n != 0 {
		t.Fatalf("refused POSTs queued %d jobs", n)
	}
	status, body := p.post(link+"/undo", form, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": p.srv.URL})
	if status != 200 || !strings.Contains(body, "Undoing the last publish") || p.pending("alice") != queued+1 {
		t.Fatalf("the page's own undo: %d, %d queued\n%s", status, p.pending("alice")-queued, body)
	}
	// Revoked: this link and every older one are refused; a link issued after works.
	if err := p.in.RevokeThreadLinks(context.Background(), tenant.ID{Project: "site", User: "alice"}, a.Job.Thread); err != nil {
		t.Fatal(err)
	}
	if status, body := p.get(link); status != http.StatusForbidden || !strings.Contains(body, "turned off") {
		t.Errorf("revoked link: %d\n%s", status, body)
	}
	p.offset.Store(int64(time.Second))
	again, fresh := p.doneThread("alice@example.com", "example.com", "a2@example.com", "Make the footer green.", "In-Reply-To: <a1@example.com>\r\n")
	if again.Job.Thread != a.Job.Thread {
		t.Fatalf("the follow-up went to thread %s, not %s", again.Job.Thread, a.Job.Thread)
	}
	if status, body := p.get(fresh); status != 200 || !strings.Contains(body, "Make the footer green.") {
		t.Errorf("a link issued after the revocation: %d\n%s", status, body)
	}
	// Expired: the clock past the link's hour.
	p.offset.Store(int64(2 * time.Hour))
	if status, body := p.get(fresh); status != http.StatusForbidden || !strings.Contains(body, "expired") || strings.Contains(body, "footer") {
		t.Errorf("expired link: %d\n%s", status, body)
	}
}

// A thread link is signed for its own purpose: not under the purpose of reply tokens, whose
// MAC of a thread id is then a prefix of the link's MAC of the same bytes (the same secret
// signs both). Whoever holds a reply address holds no part of any link, and the reverse.
func TestThreadLinkSignatureIsNotAReplyTokens(t *testing.T) {
	t.Parallel()
	p := setupPages(t)
	_, link := p.doneThread("alice@example.com", "example.com", "sig1@example.com", "Make the header green.")
	payload, mac, _ := strings.Cut(link[strings.LastIndex(link, "/")+1:], ".")
	h := hmac.New(sha256.New, p.cfg.Secret)
	h.Write([]byte("webordinary-thread:" + payload)) // a reply token's purpose (token.go)
	if replyMAC := hex.EncodeToString(h.Sum(nil)); strings.HasPrefix(replyMAC, mac) || strings.HasPrefix(mac, replyMAC[:20]) {
		t.Fatalf("the link's MAC %s is the reply tokens' MAC of its payload", mac)
	}
	if status, _ := p.get(link); status != http.StatusOK {
		t.Fatalf("the link answers %d", status)
	}
}
