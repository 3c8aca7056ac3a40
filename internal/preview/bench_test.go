package preview

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkDeployOneChangedPageOf1000 deploys a 1,000-page site (about 5 KB a page) in which
// one page changes per deploy: the everyday edit.
func BenchmarkDeployOneChangedPageOf1000(b *testing.B) {
	d, err := NewDir(DirConfig{Root: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	src := b.TempDir()
	filler := strings.Repeat("lorem ipsum dolor sit amet ", 190) // ~5 KB
	for i := range 1000 {
		writeTree(b, src, map[string]string{fmt.Sprintf("blog/%02d/post-%03d/index.html", i/100, i): fmt.Sprintf("<h1>%d</h1>%s", i, filler)})
	}
	site := Site{"bench", "t1"}
	ctx := context.Background()
	if _, err := d.Deploy(ctx, site, src); err != nil {
		b.Fatal(err)
	}
	changed := filepath.Join(src, "blog/00/post-000/index.html")
	i := 0
	cpu := processCPU()
	b.ResetTimer()
	for b.Loop() {
		i++
		if err := os.WriteFile(changed, fmt.Appendf(nil, "<h1>edit %d</h1>%s", i, filler), 0o644); err != nil {
			b.Fatal(err)
		}
		dep, err := d.Deploy(ctx, site, src)
		if err != nil || dep.Written != 1 || dep.Unchanged != 999 {
			b.Fatalf("deploy = %+v, %v; want 1 written, 999 unchanged", dep, err)
		}
	}
	// CPU time is steadier than wall time on a shared machine.
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}
