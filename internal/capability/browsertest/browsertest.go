// Package browsertest starts a headless Chromium for a test (the dashboard's, the replies' and
// the thread page's browser tests), found and skipped through capability.Chromium.
package browsertest

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/webordinary/webordinary/internal/capability"
)

// Tab starts a headless Chromium with a profile of its own and returns its first tab; the
// browser stops when t ends. Without Chromium t is skipped (failed under CI=true), saying how
// to get it. opts add to the allocator's options (a window size, say).
func Tab(t *testing.T, opts ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	capability.Need(t, capability.Chromium)
	path := capability.Browser()
	opts = append([]chromedp.ExecAllocatorOption{chromedp.ExecPath(path), chromedp.Headless,
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir())}, opts...)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	tab, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	if err := chromedp.Do(tab); err != nil { // starts the browser, for the tab's lifetime
		t.Fatalf("start %s: %v", path, err)
	}
	return tab
}
