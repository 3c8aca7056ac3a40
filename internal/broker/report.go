package broker

import "encoding/json"

// Report is what a processor tells about a job it ran (Result.Report): the commit, the files
// it changed, the preview links, what the agent cost and where the time went. Every field is
// optional; a processor fills what it knows. Replies, the dashboard and the CLI read this one
// type; its JSON form (keys as before it was typed) is stored in job records and results.
type Report struct {
	// Branch is the thread's git branch.
	Branch string `json:"branch,omitempty"`
	// Commit is the full SHA of the job's commit.
	Commit string `json:"commit,omitempty"`
	// Files are the paths the commit changed.
	Files []FileChange `json:"files,omitempty"`
	// Diffstat is `git diff --stat` of the commit.
	Diffstat string `json:"diffstat,omitempty"`
	// PreviewURLs are where the built site can be seen.
	PreviewURLs []string `json:"previewUrls,omitempty"`
	// AgentCostUSD, AgentTurns and AgentDurationMs describe the agent's run.
	AgentCostUSD    float64 `json:"agentCostUsd,omitempty"`
	AgentTurns      int     `json:"agentTurns,omitempty"`
	AgentDurationMs int64   `json:"agentDurationMs,omitempty"`
	// DurationMs is the processor's whole run.
	DurationMs int64 `json:"durationMs,omitempty"`
	// StagesMs is the time per pipeline stage (git, agent, build, deploy, commit, push).
	StagesMs map[string]int64 `json:"stagesMs,omitempty"`
	// BuildLogTail is the end of the site build's log.
	BuildLogTail string `json:"buildLogTail,omitempty"`
	// Interrupted: a newer instruction stopped the job; partial work was committed.
	Interrupted bool `json:"interrupted,omitempty"`
	// NoChanges: the agent changed nothing, so nothing was committed.
	NoChanges bool `json:"noChanges,omitempty"`
	// Resent: a redelivered job whose commit existed; only the result was sent again.
	Resent bool `json:"resent,omitempty"`
}

// FileChange is one changed path, with git's status letter (A, M, D, R...).
type FileChange struct {
	Status string `json:"status"`
	Path   string `json:"path"`
}

// report has Report's fields without its UnmarshalJSON.
type report Report

// UnmarshalJSON decodes a report leniently: a field of an unexpected type (written by an
// older or newer version) is left empty instead of making the whole job record unreadable.
func (r *Report) UnmarshalJSON(data []byte) error {
	if err := json.Unmarshal(data, (*report)(r)); err == nil {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return err
	}
	*r = Report{}
	for k, v := range fields {
		one, _ := json.Marshal(map[string]json.RawMessage{k: v})
		var field report
		if json.Unmarshal(one, &field) == nil {
			_ = json.Unmarshal(one, (*report)(r))
		}
	}
	return nil
}
