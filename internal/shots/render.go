package shots

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Width is a viewport the pages are rendered at.
type Width struct {
	Name   string // "desktop", "phone": used in file names and alt text
	Width  int    // CSS pixels
	Height int    // the viewport's height; the picture may be taller (up to MaxHeight)
	Mobile bool   // emulate a phone: the page's viewport meta tag applies
}

// Default widths: a laptop and a current phone, both at device scale 1.
var (
	Desktop = Width{Name: "desktop", Width: 1280, Height: 800}
	Phone   = Width{Name: "phone", Width: 390, Height: 844, Mobile: true}
)

// shot asks for one page at one width from one version.
type shot struct {
	path      string       // URL path, e.g. "/" or "/about/"
	width     Width        // viewport
	site      http.Handler // the version: a *preview.Version
	version   string       // its id
	maxHeight int          // the picture's height limit; 0 takes no picture (a warm-up)
}

// originFor is where a page of a version seems to come from in tab n:
// http://v<version>.t<n>.invalid. Each tab is a site of its own (".invalid" is no public
// suffix, so t<n>.invalid is the site), so Chromium never puts two tabs in one renderer
// process and a page whose script never yields holds up only its own tab; each version is an
// origin of its own, so nothing cached from the version before is reused for the one after.
// Nothing listens there: every request is paused by the browser and answered from the version
// (see serveRequest).
func originFor(tab int64, version string) string {
	return fmt.Sprintf("http://v%s.t%d.invalid", version, tab)
}

// tabs numbers tabs for their sites.
var tabs atomic.Int64

// tab is a page of the browser, in a browser context of its own, that renders shots one after
// the other: setting up a tab costs more than a render, so a job's renders share a few.
type tab struct {
	b       *browser
	ctxID   string
	session string
	n       int64
	width   Width // the viewport set, zero before the first render

	mu     sync.Mutex
	sites  map[string]http.Handler // by origin: the versions this tab has shown
	loaded chan struct{}           // a load event of the main frame
}

// newTab opens a tab with request interception on.
func (b *browser) newTab(ctx context.Context) (*tab, error) {
	t := &tab{b: b, n: tabs.Add(1), sites: map[string]http.Handler{}, loaded: make(chan struct{}, 1)}
	var bc struct {
		ID string `json:"browserContextId"`
	}
	if err := b.c.call(ctx, "", "Target.createBrowserContext", map[string]any{"disposeOnDetach": true}, &bc); err != nil {
		return nil, err
	}
	t.ctxID = bc.ID
	var tgt struct {
		ID string `json:"targetId"`
	}
	var att struct {
		Session string `json:"sessionId"`
	}
	err := b.c.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank", "browserContextId": bc.ID}, &tgt)
	if err == nil {
		err = b.c.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": tgt.ID, "flatten": true}, &att)
	}
	if err != nil {
		t.close()
		return nil, err
	}
	t.session = att.Session
	b.c.subscribe(t.session, t.onEvent)
	for _, st := range []struct {
		method string
		params any
	}{
		{"Fetch.enable", map[string]any{"patterns": []map[string]any{{"urlPattern": "*"}}}},
		{"Page.enable", nil},
		{"Emulation.setEmulatedMedia", map[string]any{"features": []map[string]string{{"name": "prefers-reduced-motion", "value": "reduce"}}}},
	} {
		if err := b.c.call(ctx, t.session, st.method, st.params, nil); err != nil {
			t.close()
			return nil, err
		}
	}
	return t, nil
}

// blankPage answers every request of a tab's warm-up.
var blankPage = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write([]byte("<!doctype html><title></title>"))
})

// warmUp loads a blank page of the tab's site, so the renderer process the tab's pages use is
// running before the first of them.
func (t *tab) warmUp(ctx context.Context) error {
	_, err := t.render(ctx, shot{path: "/", width: Desktop, site: blankPage, version: "warm", maxHeight: 0})
	return err
}

// close disposes of the tab's browser context, which ends its renderer even if a script never
// yields; it waits at most two seconds for the browser to confirm.
func (t *tab) close() {
	if t.session != "" {
		t.b.c.subscribe(t.session, nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = t.b.c.call(ctx, "", "Target.disposeBrowserContext", map[string]any{"browserContextId": t.ctxID}, nil)
}

// onEvent runs on the connection's read loop: answer paused requests, note load events.
func (t *tab) onEvent(ev event) {
	switch ev.Method {
	case "Fetch.requestPaused":
		go t.serveRequest(ev.Params)
	case "Page.loadEventFired":
		select {
		case t.loaded <- struct{}{}:
		default:
		}
	}
}

// rendered is a page's picture and title.
type rendered struct {
	img   image.Image
	title string
}

// render loads s and returns its picture: the viewport's width, the page's height up to
// s.maxHeight. ctx is the page's time budget; a tab whose render failed must be closed, not
// reused (its page may still be running).
func (t *tab) render(ctx context.Context, s shot) (rendered, error) {
	if t.width != s.width {
		err := t.b.c.call(ctx, t.session, "Emulation.setDeviceMetricsOverride", map[string]any{"width": s.width.Width,
			"height": s.width.Height, "deviceScaleFactor": 1, "mobile": s.width.Mobile}, nil)
		if err != nil {
			return rendered{}, err
		}
		t.width = s.width
	}
	origin := originFor(t.n, s.version)
	t.mu.Lock()
	t.sites[origin] = s.site
	t.mu.Unlock()
	select {
	case <-t.loaded: // a late event of the page before
	default:
	}
	if err := t.b.c.call(ctx, t.session, "Page.navigate", map[string]any{"url": origin + s.path}, nil); err != nil {
		return rendered{}, err
	}
	select {
	case <-t.loaded:
	case <-ctx.Done():
		return rendered{}, fmt.Errorf("the page did not finish loading within its time budget: %w", ctx.Err())
	}
	title, err := t.settle(ctx)
	if err != nil || s.maxHeight == 0 {
		return rendered{}, err
	}
	img, err := t.screenshot(ctx, s)
	return rendered{img: img, title: title}, err
}

// settle waits for web fonts and two animation frames, so the picture shows the laid-out page,
// and returns the page's title.
func (t *tab) settle(ctx context.Context) (string, error) {
	expr := `document.fonts.ready.then(() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(String(document.title))))))`
	var res struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
	}
	err := t.b.c.call(ctx, t.session, "Runtime.evaluate", map[string]any{"expression": expr, "awaitPromise": true, "returnByValue": true}, &res)
	if err != nil && ctx.Err() != nil {
		return "", fmt.Errorf("the page did not settle within its time budget: %w", ctx.Err())
	}
	title, _ := res.Result.Value.(string)
	return strings.TrimSpace(title), err
}

// screenshot captures the viewport's width and the page's height, up to s.maxHeight.
func (t *tab) screenshot(ctx context.Context, s shot) (image.Image, error) {
	var lm struct {
		Content struct {
			Height float64 `json:"height"`
		} `json:"cssContentSize"`
	}
	if err := t.b.c.call(ctx, t.session, "Page.getLayoutMetrics", nil, &lm); err != nil {
		return nil, err
	}
	h := min(max(int(lm.Content.Height+0.5), s.width.Height), s.maxHeight)
	var shotRes struct {
		Data string `json:"data"`
	}
	err := t.b.c.call(ctx, t.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true,
		"clip": map[string]any{"x": 0, "y": 0, "width": s.width.Width, "height": h, "scale": 1}}, &shotRes)
	if err != nil {
		return nil, err
	}
	raw, err := base64.StdEncoding.DecodeString(shotRes.Data)
	if err != nil {
		return nil, err
	}
	return png.Decode(bytes.NewReader(raw))
}

// pausedRequest is the part of Fetch.requestPaused we use.
type pausedRequest struct {
	RequestID string `json:"requestId"`
	Request   struct {
		URL    string `json:"url"`
		Method string `json:"method"`
	} `json:"request"`
}

// maxResponse bounds one response handed to the browser (base64 over the pipe).
const maxResponse = 32 << 20

// serveRequest answers a paused request: from the version its origin names, refused for any
// other origin. The browser never opens a connection of its own.
func (t *tab) serveRequest(params json.RawMessage) {
	var pr pausedRequest
	if json.Unmarshal(params, &pr) != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var site http.Handler
	if u, err := url.Parse(pr.Request.URL); err == nil {
		t.mu.Lock()
		site = t.sites[u.Scheme+"://"+u.Host]
		t.mu.Unlock()
	}
	if site == nil {
		_ = t.b.c.call(ctx, t.session, "Fetch.failRequest", map[string]any{"requestId": pr.RequestID, "errorReason": "BlockedByClient"}, nil)
		return
	}
	rec := httptest.NewRecorder()
	method := pr.Request.Method
	if method != http.MethodHead {
		method = http.MethodGet
	}
	site.ServeHTTP(rec, httptest.NewRequest(method, pr.Request.URL, nil))
	body, _ := io.ReadAll(io.LimitReader(rec.Body, maxResponse))
	_ = t.b.c.call(ctx, t.session, "Fetch.fulfillRequest", map[string]any{"requestId": pr.RequestID,
		"responseCode": rec.Code, "responseHeaders": headerEntries(rec.Header()),
		"body": base64.StdEncoding.EncodeToString(body)}, nil)
}

func headerEntries(h http.Header) []map[string]string {
	var out []map[string]string
	for k, vs := range h {
		out = append(out, map[string]string{"name": k, "value": strings.Join(vs, ", ")})
	}
	return out
}
