package dashboard

import (
	"cmp"
	"net/url"
	"slices"

	"github.com/webordinary/webordinary/internal/pipeline/report"
)

// details is a job's report with what the job page derives from it.
type details struct{ report.Report }

// stage is one pipeline stage's time, for the bar chart.
type stage struct {
	Name string
	Ms   int64
	// Percent of the longest stage, for the bar's width.
	Percent int
}

// stageOrder is the pipeline's order; unknown stages follow by name.
var stageOrder = []string{"git", "agent", "build", "deploy", "commit", "push", "shots", "check"}

// Stages lists the stage times in pipeline order.
func (d details) Stages() []stage {
	var out []stage
	var longest int64 = 1
	for name, ms := range d.StagesMs {
		out = append(out, stage{Name: name, Ms: ms})
		longest = max(longest, ms)
	}
	rank := func(name string) int {
		if i := slices.Index(stageOrder, name); i >= 0 {
			return i
		}
		return len(stageOrder)
	}
	slices.SortFunc(out, func(a, b stage) int {
		return cmp.Or(cmp.Compare(rank(a.Name), rank(b.Name)), cmp.Compare(a.Name, b.Name))
	})
	for i := range out {
		out[i].Percent = int(max(out[i].Ms, 0) * 100 / longest)
	}
	return out
}

// link is a preview URL; only http and https URLs are made links.
type link struct {
	URL  string
	Safe bool
}

// Previews lists the preview URLs, marking which may be links.
func (d details) Previews() []link {
	out := make([]link, 0, len(d.PreviewURLs))
	for _, u := range d.PreviewURLs {
		out = append(out, link{URL: u, Safe: webURL(u)})
	}
	return out
}

func webURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// ShortCommit is the commit's first 10 characters.
func (d details) ShortCommit() string { return d.Commit[:min(len(d.Commit), 10)] }
