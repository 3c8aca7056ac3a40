package inbound_test

import (
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/webordinary/webordinary/internal/capability/browsertest"
	"github.com/webordinary/webordinary/internal/project"
	"github.com/webordinary/webordinary/internal/shots"
)

// TestThreadPageReadsOnAPhone renders a thread page with pictures, a preview, a live site,
// publish and undo in headless Chromium at 390 and 1280 px: nothing is wider than the
// screen, the preview button is on a phone's first screen, and the pictures are served to
// the page and fit it. WO_REPLY_SHOTS=DIR keeps a screenshot of each.
func TestThreadPageReadsOnAPhone(t *testing.T) {
	t.Parallel()
	tab := threadBrowser(t)
	p := setupPages(t)
	a, link := p.doneThread("alice@example.com", "example.com", "a1@example.com",
		"Please make the header green and put the attached photo in the gallery, after the three that are there.")
	if _, err := p.cfg.Threads.Update(context.Background(), a.Job.Thread, func(th *project.Thread) {
		th.Built = &project.Built{Tree: "t", Version: "1", Job: a.Job.ID}
		th.Publishes = append(th.Publishes, project.Publish{Job: "j0", URL: "https://bakery-on-the-corner.example.com/"})
	}); err != nil {
		t.Fatal(err)
	}
	writePictures(t, p.cfg.Shots, a.Job.ID)
	for _, width := range []int64{390, 1280} {
		ctx, cancel := context.WithTimeout(tab, 30*time.Second)
		err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 844), chromedp.Navigate(link), chromedp.WaitReady("body"))
		if err != nil {
			cancel()
			t.Fatalf("render at %d px: %v", width, err)
		}
		lay, err := chromedp.Run(ctx, chromedp.Evaluate[threadLayout](`(async () => {
			const imgs = [...document.images];
			await Promise.all(imgs.map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; })));
			const b = document.querySelector('a.button');
			return {scrollWidth: document.documentElement.scrollWidth,
				buttonBottom: b ? Math.round(b.getBoundingClientRect().bottom) : 0,
				images: imgs.length, loaded: imgs.filter(i => i.naturalWidth > 0).length,
				widest: Math.max(0, ...imgs.map(i => Math.round(i.getBoundingClientRect().width)))};
		})()`, chromedp.EvalAwaitPromise))
		if err != nil {
			cancel()
			t.Fatalf("measure at %d px: %v", width, err)
		}
		if dir := os.Getenv("WO_REPLY_SHOTS"); dir != "" {
			if shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
				_ = os.WriteFile(filepath.Join(dir, "thread-page-"+strconv.FormatInt(width, 10)+".png"), shot, 0o644)
			}
		}
		cancel()
		t.Logf("%d px: %+v", width, lay)
		if lay.ScrollWidth > int(width) || lay.Widest > int(width) {
			t.Errorf("at %d px the page is %d px wide, its widest picture %d px", width, lay.ScrollWidth, lay.Widest)
		}
		if lay.Images != 2 || lay.Loaded != 2 {
			t.Errorf("at %d px: %d pictures, %d loaded; want the before and the after", width, lay.Images, lay.Loaded)
		}
		if width == 390 && (lay.ButtonBottom <= 0 || lay.ButtonBottom > 844) {
			t.Errorf("at 390 px the preview button ends at %d px, past the first screen (844)", lay.ButtonBottom)
		}
	}
}

type threadLayout struct {
	ScrollWidth  int `json:"scrollWidth"`
	ButtonBottom int `json:"buttonBottom"`
	Images       int `json:"images"`
	Loaded       int `json:"loaded"`
	Widest       int `json:"widest"`
}

// writePictures stores a shots report for job: the phone picture before and after, wider than
// a phone (device scale 2).
func writePictures(t *testing.T, st *shots.Store, job string) {
	t.Helper()
	dir := filepath.Join(st.Dir, job)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]color.RGBA{"p1-phone-before.png": {0, 0, 255, 255}, "p1-phone-marked.png": {0, 160, 0, 255}} {
		img := image.NewRGBA(image.Rect(0, 0, 780, 1400))
		draw.Draw(img, img.Bounds(), &image.Uniform{c}, image.Point{}, draw.Src)
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := png.Encode(f, img); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	rep := shots.Report{Pages: []shots.Page{{Path: "/", Title: "Home", Shots: []shots.Picture{{Width: "phone",
		Before: "p1-phone-before.png", After: "p1-phone-after.png", Marked: "p1-phone-marked.png",
		Alt: "The home page on a phone screen after the change; the changed part is outlined."}}}}}
	data, _ := json.Marshal(rep)
	if err := os.WriteFile(filepath.Join(dir, "report.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// threadBrowser starts a headless Chromium for the test, or skips (fails in CI) saying how to
// get one.
func threadBrowser(t *testing.T) context.Context {
	t.Helper()
	return browsertest.Tab(t)
}
