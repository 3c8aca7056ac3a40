package outbox

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/webordinary/webordinary/internal/capability/browsertest"
	"github.com/webordinary/webordinary/internal/failure"
)

// replyKinds are the replies an owner can get, each as it is really filled.
func replyKinds(t *testing.T) map[string]Reply {
	base := sampleReply()
	base.Understood = "Please make the header green and put the attached photo in the gallery."
	base.Summary = "I made the header green and added your photo to the gallery, after the three that were there."
	base.PreviewURLs = []string{"https://t0k3n.edit.bakery-on-the-corner.example.com/", "https://edit.bakery-on-the-corner.example.com/"}
	base.Publishable, base.PublishURL = true, "https://edit.example.com/publish/"+strings.Repeat("x9Q", 40)
	base.ThreadURL = "https://edit.example.com/t/" + strings.Repeat("Zm9v", 30)
	phone := Image{ContentID: "p1-phone@job-42.webordinary", ContentType: "image/png", Data: testPNG(t, 780, 900),
		Width: 780, Height: 900, Screen: "phone", Alt: "The home page on a phone screen; the changed part is outlined."}
	out := map[string]Reply{}
	set := func(name string, f func(r *Reply)) {
		r := base
		f(&r)
		out[name] = r
	}
	set("done", func(r *Reply) { r.Kind, r.Images = Done, []Image{phone} })
	set("follow-up", func(r *Reply) { r.Kind, r.Continued, r.Images = Done, 1, []Image{phone} })
	set("nothing-changed", func(r *Reply) {
		r.Kind, r.NoChanges = Done, true
		r.Summary = "The header is already green.\nProcess exited with code 1\nbwrap: execvp codex-linux-sandbox: No such file or directory"
	})
	set("interrupted", func(r *Reply) { r.Kind, r.Superseded = Interrupted, true })
	set("build-failed", func(r *Reply) { r.Kind, r.Error, r.Problem = Failed, "build: exit 1", failure.Build })
	set("busy-model", func(r *Reply) {
		r.Kind, r.Error, r.Problem = Failed, "agent: 529 overloaded", failure.Model
	})
	set("still-on-it", func(r *Reply) { r.Kind, r.ModelBusy = Waiting, true })
	set("publish", func(r *Reply) {
		r.Kind, r.LiveURL = Published, "https://bakery-on-the-corner.example.com/"
		r.Summary = "Your changes from this conversation are live at https://bakery-on-the-corner.example.com/."
	})
	set("undo", func(r *Reply) {
		r.Kind, r.Undone, r.LiveURL = Published, true, "https://bakery-on-the-corner.example.com/"
		r.Summary = "I undid the last publish: the live site at https://bakery-on-the-corner.example.com/ is back to how it was before it."
	})
	set("refused", func(r *Reply) {
		r.Kind, r.Error, r.Hint = Refused, "this address is not verified for bakery-on-the-corner.example.com", "Ask the site's operator to add you."
	})
	return out
}

// TestRepliesReadOnAPhone renders every kind of reply in headless Chromium at 390 and 1280
// pixels: nothing is wider than the screen, and a done reply shows its preview button on a
// phone's first screen, above its one picture, and says nothing of branches or commits.
// WO_REPLY_SHOTS=DIR keeps a screenshot of each.
func TestRepliesReadOnAPhone(t *testing.T) {
	t.Parallel()
	pages := map[string]string{}
	for name, r := range replyKinds(t) {
		c := bodyOf(r)
		html, err := renderHTML("Re: Opening hours", c)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range c.images() {
			html = strings.ReplaceAll(html, "cid:"+im.ContentID, "data:"+im.ContentType+";base64,"+base64.StdEncoding.EncodeToString(im.Data))
		}
		for _, jargon := range []string{"thread/t0k3n", "0123456", "Branch", "commit", "$", "bwrap", "exited with code"} {
			if strings.Contains(html, jargon) || strings.Contains(renderText(c), jargon) {
				t.Errorf("%s reply says %q", name, jargon)
			}
		}
		pages[name] = html
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, pages[strings.TrimPrefix(r.URL.Path, "/")])
	}))
	defer srv.Close()
	tab := browserTab(t)
	for _, width := range []int64{390, 1280} {
		for name := range pages {
			lay := layout(t, tab, srv.URL+"/"+name, width)
			if lay.ScrollWidth > int(width) {
				t.Errorf("%s at %d px: the page is %d px wide", name, width, lay.ScrollWidth)
			}
			if name == "done" && width == 390 {
				if lay.ButtonBottom <= 0 || lay.ButtonBottom > 844 || lay.ImageTop < lay.ButtonBottom {
					t.Errorf("done at 390 px: preview button ends at %d px (first screen 844), picture starts at %d px", lay.ButtonBottom, lay.ImageTop)
				}
			}
		}
	}
}

// pageLayout is what the test measures of a rendered reply.
type pageLayout struct {
	ScrollWidth  int `json:"scrollWidth"`
	ButtonBottom int `json:"buttonBottom"`
	ImageTop     int `json:"imageTop"`
}

// layout opens url at width and measures it, keeping a screenshot under $WO_REPLY_SHOTS.
func layout(t *testing.T, tab context.Context, url string, width int64) pageLayout {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 844), chromedp.Navigate(url), chromedp.WaitReady("body"))
	if err != nil {
		t.Fatalf("render %s at %d px: %v", url, width, err)
	}
	lay, err := chromedp.Run(ctx, chromedp.Evaluate[pageLayout](`(() => {
		const b = document.querySelector('a[style*="inline-block"]'), i = document.querySelector('img');
		return {scrollWidth: document.documentElement.scrollWidth,
			buttonBottom: b ? Math.round(b.getBoundingClientRect().bottom) : 0,
			imageTop: i ? Math.round(i.getBoundingClientRect().top) : 100000};
	})()`))
	if err != nil {
		t.Fatalf("measure %s at %d px: %v", url, width, err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s at %d px: %v", url, width, err)
	}
	if dir := os.Getenv("WO_REPLY_SHOTS"); dir != "" {
		name := fmt.Sprintf("%s-%d.png", filepath.Base(url), width)
		if err := os.WriteFile(filepath.Join(dir, name), shot, 0o644); err != nil {
			t.Log(err)
		}
	}
	return lay
}

// browserTab starts a headless Chromium for the test, or skips saying how to get one.
func browserTab(t *testing.T) context.Context {
	t.Helper()
	return browsertest.Tab(t)
}
