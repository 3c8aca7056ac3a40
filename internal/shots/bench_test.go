package shots_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/shots"
)

// benchPage is a page of a small business site: a header, a navigation bar, a few sections
// of text and a footer, styled by a shared sheet.
func benchPage(title, note string) string {
	var b strings.Builder
	b.WriteString(`<!doctype html><html><head><meta name="viewport" content="width=device-width"><title>` + title +
		`</title><link rel="stylesheet" href="/style.css"></head><body><header><h1>Acme bakery</h1><nav><a href="/">Home</a> <a href="/menu/">Menu</a> <a href="/about/">About</a></nav></header><main>`)
	b.WriteString("<h2>" + title + "</h2><p class=note>" + note + "</p>")
	for i := range 8 {
		fmt.Fprintf(&b, "<section><h3>Section %d</h3><p>%s</p></section>", i, strings.Repeat("Sourdough, rye and spelt, baked every morning from six. ", 6))
	}
	b.WriteString("</main><footer>Acme bakery, 1 Main Street</footer></body></html>")
	return b.String()
}

const benchStyle = `body{margin:0;font:16px/1.5 sans-serif;color:#222} header{background:#7a3e12;color:#fff;padding:16px 24px}
nav a{color:#fff;margin-right:12px} main{max-width:760px;margin:0 auto;padding:24px} .note{background:#ffe;padding:8px}
footer{background:#eee;padding:16px 24px}`

// BenchmarkShoot measures the time pictures add to a job: Shoot to the stored report, for 1
// and 3 changed pages at both widths. before=rendered is a job whose before pictures must be
// taken too (4 and 12 renders); before=reused is a follow-up in a thread, whose before
// pictures are the last job's after pictures (2 and 6 renders). browser=warm is the
// pipeline's case: the browser was started while the site built (Shooter.Warm), which is not
// timed; browser=cold starts it inside Shoot. It reports the median (p50) and the slowest.
func BenchmarkShoot(b *testing.B) {
	for _, c := range []struct {
		pages      int
		reuse, hot bool
	}{{1, false, false}, {1, false, true}, {1, true, true}, {3, false, true}, {3, true, true}} {
		pages := c.pages
		mode := map[bool]string{false: "rendered", true: "reused"}[c.reuse]
		start := map[bool]string{false: "cold", true: "warm"}[c.hot]
		b.Run(fmt.Sprintf("pages=%d/before=%s/browser=%s", pages, mode, start), func(b *testing.B) {
			f := setup(b, shots.Config{})
			paths := []string{"index.html", "menu/index.html", "about/index.html"}
			files := map[string]string{"style.css": benchStyle}
			for _, p := range paths {
				files[p] = benchPage(p, "v0")
			}
			f.deploy(files)
			var took []time.Duration
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				next := map[string]string{}
				for _, p := range paths[:pages] {
					next[p] = benchPage(p, fmt.Sprintf("Open on Sundays (version %d)", i+1))
				}
				dep := f.deploy(next)
				if !c.reuse {
					_ = os.RemoveAll(filepath.Join(f.sh.Store().Dir, ".cache"))
				}
				var warm *shots.Warm
				if c.hot {
					warm = f.sh.Warm(context.Background())
					warm.Wait()
				}
				b.StartTimer()
				start := time.Now()
				rep, err := f.shootWarm(fmt.Sprintf("bench-%d", i), dep, warm)
				took = append(took, time.Since(start))
				if err != nil || len(rep.Pages) != pages {
					b.Fatalf("shoot: %v, %d pages (%s)", err, len(rep.Pages), rep.Note)
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "p50-ms/job")
			b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms/job")
		})
	}
}
