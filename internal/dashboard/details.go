package dashboard

import (
	"cmp"
	"encoding/json"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// details are the pipeline's Result.Details, typed. A record read back from storage holds
// JSON-decoded values (float64, []any), one made in this process holds Go values; both
// reach this struct through a JSON round trip, and fields of an unexpected type stay empty.
type details struct {
	Files           []fileChange     `json:"files"`
	Diffstat        string           `json:"diffstat"`
	PreviewURLs     []string         `json:"previewUrls"`
	Branch          string           `json:"branch"`
	Commit          string           `json:"commit"`
	AgentCostUSD    *float64         `json:"agentCostUsd"`
	AgentTurns      int              `json:"agentTurns"`
	AgentDurationMs int64            `json:"agentDurationMs"`
	DurationMs      int64            `json:"durationMs"`
	StagesMs        map[string]int64 `json:"stagesMs"`
	BuildLogTail    string           `json:"buildLogTail"`
	Interrupted     bool             `json:"interrupted"`
	NoChanges       bool             `json:"noChanges"`
	Resent          bool             `json:"resent"`
	// Other holds the keys this page does not know, as JSON.
	Other []keyValue `json:"-"`
}

type fileChange struct {
	Status string `json:"status"`
	Path   string `json:"path"`
}

type keyValue struct{ Key, Value string }

// stage is one pipeline stage's time, for the bar chart.
type stage struct {
	Name string
	Ms   int64
	// Percent of the longest stage, for the bar's width.
	Percent int
}

var knownDetails = map[string]bool{"files": true, "diffstat": true, "previewUrls": true, "branch": true,
	"commit": true, "agentCostUsd": true, "agentTurns": true, "agentDurationMs": true, "durationMs": true,
	"stagesMs": true, "buildLogTail": true, "interrupted": true, "noChanges": true, "resent": true}

func parseDetails(m map[string]any) details {
	var d details
	if len(m) == 0 {
		return d
	}
	if raw, err := json.Marshal(m); err == nil {
		_ = json.Unmarshal(raw, &d) // best effort: mistyped fields stay empty
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !knownDetails[k] {
			d.Other = append(d.Other, keyValue{Key: k, Value: plainJSON(m[k])})
		}
	}
	return d
}

// stageOrder is the pipeline's order; unknown stages follow by name.
var stageOrder = []string{"git", "agent", "build", "deploy", "commit", "push"}

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

// plainJSON is v as compact JSON without HTML escapes (the template escapes it).
func plainJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}
