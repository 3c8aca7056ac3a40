package dashboard

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/pipeline/report"
)

func TestExcerpt(t *testing.T) {
	t.Parallel()
	cases := []struct {
		n        int
		in, want string
	}{
		{10, "short", "short"},
		{10, "  first line  \nsecond", "first line …"},
		{5, "abcdefgh", "abcd…"},
		{3, "héllo", "hé…"},
		{10, "", ""},
	}
	for _, c := range cases {
		if got := excerpt(c.n, c.in); got != c.want {
			t.Errorf("excerpt(%d, %q) = %q, want %q", c.n, c.in, got, c.want)
		}
	}
}

func TestCompactDuration(t *testing.T) {
	t.Parallel()
	cases := map[time.Duration]string{
		-time.Second:                                 "0s",
		850 * time.Millisecond:                       "850ms",
		4210 * time.Millisecond:                      "4.2s",
		3*time.Minute + 12400*time.Millisecond:       "3m12s",
		5*time.Hour + 4*time.Minute + 20*time.Second: "5h4m",
	}
	for d, want := range cases {
		if got := compactDuration(d); got != want {
			t.Errorf("compactDuration(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestLocalPath(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"/jobs/j1":             "/jobs/j1",
		"/dead?retried=x":      "/dead?retried=x",
		"":                     "/",
		"//evil.example":       "/",
		"/\\evil.example":      "/",
		"https://evil.example": "/",
		"javascript:alert(1)":  "/",
		"relative":             "/",
		"/a\r\nLocation: x":    "/",
	}
	for in, want := range cases {
		if got := localPath(in, "/"); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLoopbackHost(t *testing.T) {
	t.Parallel()
	cases := map[string]bool{
		"localhost": true, "localhost:8080": true, "app.localhost:1": true, "127.0.0.1:80": true,
		"127.1.2.3": true, "[::1]:8080": true, "::1": true, "LOCALHOST.": true,
		"example.com": false, "10.0.0.1:80": false, "localhost.evil.com": false, "": false,
	}
	for host, want := range cases {
		if got := loopbackHost(host); got != want {
			t.Errorf("loopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

// TestDetails: previews are links only for http(s); stages come in pipeline order with bars
// relative to the longest; the commit is shortened.
func TestDetails(t *testing.T) {
	t.Parallel()
	d := details{report.Report{PreviewURLs: []string{"https://p.example/", "javascript:x"}, Commit: "abcdef0123456789",
		StagesMs: map[string]int64{"push": 5, "agent": 100, "zeta": 1, "git": 10}}}
	got := fmt.Sprintf("%v %s %v", d.Previews(), d.ShortCommit(), d.Stages())
	want := `[{https://p.example/ true} {javascript:x false}] abcdef0123 [{git 10 10} {agent 100 100} {push 5 5} {zeta 1 1}]`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestFeedStopsWithoutWatchers: the feed polls only while someone watches, notifies on
// change only, and its goroutine ends after the last watcher leaves.
func TestFeedStopsWithoutWatchers(t *testing.T) {
	t.Parallel()
	var reads, value atomic.Int64
	f := newFeed(5*time.Millisecond, func(context.Context) map[string]string {
		reads.Add(1)
		return map[string]string{"x": fmt.Sprint(value.Load())}
	})
	notify, snapshot, leave := f.join()
	<-notify
	if got := snapshot()["x"]; got != "0" {
		t.Fatalf("first snapshot %q", got)
	}
	value.Store(1)
	deadline := time.After(5 * time.Second)
	for snapshot()["x"] != "1" {
		select {
		case <-notify:
		case <-deadline:
			t.Fatal("no notification of the change")
		}
	}
	leave()
	waitUntil(t, "the feed to stop", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return !f.running
	})
	// running is cleared by the loop itself as it returns, so no read follows.
	notify2, _, leave2 := f.join()
	defer leave2()
	<-notify2 // a new watcher restarts it
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
