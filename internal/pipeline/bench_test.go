package pipeline_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/project"
)

// BenchmarkOverhead1000Pages measures the pipeline's own cost per job — git, attachments,
// deploy, commit, push; everything but the agent, the install and the site's build — on a
// static site of 1,000 pages of ~5 KB, one page changed per job.
func BenchmarkOverhead1000Pages(b *testing.B) {
	files := map[string]string{}
	page := strings.Repeat("<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit.</p>\n", 80)
	for i := range 1000 {
		files[fmt.Sprintf("pages/p%04d.html", i)] = page
	}
	f := setup(b, files, func(p *project.Project) {
		p.Agent = project.AgentSpec{Kind: "command", Command: `sed -i "s|Lorem|Edited|" pages/$WO_INSTRUCTION.html`}
	})
	var overhead, agentT time.Duration
	per := map[string]int64{}
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		out, err := f.run(task("bench", fmt.Sprintf("p%04d", i%1000)))
		took := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		stages := out.Report.StagesMs
		for k, v := range stages {
			per[k] += v
		}
		a := time.Duration(stages["agent"]+stages["build"]) * time.Millisecond
		agentT += a
		overhead += took - a
	}
	b.ReportMetric(float64(overhead.Milliseconds())/float64(b.N), "overhead-ms/job")
	b.ReportMetric(float64(agentT.Milliseconds())/float64(b.N), "agent-ms/job")
	for _, k := range []string{"git", "deploy", "commit", "push"} {
		b.ReportMetric(float64(per[k])/float64(b.N), k+"-ms/job")
	}
}
