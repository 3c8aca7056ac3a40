// Package report is what a processor tells about a job it ran: the commit, the files it
// changed, the previews, what the agent cost, the check turn, the failure's kind. The queue
// layer carries it as opaque bytes (broker.Result.Details); the pipeline and the command
// processor write it (worker.Outcome.Report), and the replies, the dashboard and the CLI read
// it back with Of.
package report

import (
	"encoding/json"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/failure"
)

// Report is what a processor tells about a job it ran: the commit, the files it changed, the
// preview links, what the agent cost and where the time went. Every field is optional; a
// processor fills what it knows. Replies, the dashboard and the CLI read this one type; its
// JSON form (keys as before it was typed) is stored in job records and results, as their
// "details".
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
	// Interrupted: the job was stopped before it finished; its partial work, if any, was
	// committed (Commit is empty when it had changed nothing).
	Interrupted bool `json:"interrupted,omitempty"`
	// InterruptedBy is the newer job on the same thread that took over from an interrupted
	// job; empty when an operator stopped it.
	InterruptedBy string `json:"interruptedBy,omitempty"`
	// Continues are the thread's interrupted jobs whose instructions and partial work this
	// job's agent was told about (the owner corrected themselves).
	Continues []string `json:"continues,omitempty"`
	// LiveURL is where the published site is live (publish and undo jobs).
	LiveURL string `json:"liveUrl,omitempty"`
	// PublishedFrom is the default branch's commit before a publish or undo; Commit is after.
	PublishedFrom string `json:"publishedFrom,omitempty"`
	// AgentSession is the agent's session id (the thread's next job resumes it).
	AgentSession string `json:"agentSession,omitempty"`
	// NoChanges: the agent changed nothing, so nothing was committed.
	NoChanges bool `json:"noChanges,omitempty"`
	// Resent: a redelivered job whose commit existed; only the result was sent again.
	Resent bool `json:"resent,omitempty"`
	// ModelRetries is how many times the agent was run again because the model service
	// turned it away (rate limited, overloaded, unreachable); ModelWait is the time spent
	// waiting before those runs.
	ModelRetries int           `json:"modelRetries,omitempty"`
	ModelWait    time.Duration `json:"modelWaitNs,omitempty"`
	// LeftOut are the paths of the working tree the platform did not commit, each with why:
	// "sub/ (a git repository inside your site)".
	LeftOut []string `json:"leftOut,omitempty"`
	// Check is what the check turn did (project.Project.CheckTurn); nil when none was due.
	Check *Check `json:"check,omitempty"`
	// EgressDenied are the destinations the job's processes (agent, install, build) tried to
	// reach and the egress proxy refused, most frequent first.
	EgressDenied []EgressDenial `json:"egressDenied,omitempty"`
	// ModelTokensIn and ModelTokensOut are the model tokens the job's agent used, as the model
	// API reported them to the egress proxy (zero when it did not go through the proxy).
	ModelTokensIn  int64 `json:"modelTokensIn,omitempty"`
	ModelTokensOut int64 `json:"modelTokensOut,omitempty"`
	// Failure is the kind of failure that ended the run, as the processor knew it (the worker
	// sets failure.Of of its error when the processor did not say); the reply, the job page
	// and status show it. Unknown when the run did not fail or nothing knew.
	Failure failure.Kind `json:"failure,omitempty"`
}

// EgressDenial is a destination a job was refused, and how often.
type EgressDenial struct {
	Target string `json:"target"`
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// Check is the check turn's account: the agent looked at the pictures of its change.
type Check struct {
	// Pictures is how many pictures the agent was given.
	Pictures int `json:"pictures,omitempty"`
	// Changed: the agent fixed something; the preview, pictures and commit have the fix.
	Changed bool `json:"changed,omitempty"`
	// Summary is what the agent said about the result (its fix, or that it was fine).
	Summary string `json:"summary,omitempty"`
	// Note says why the turn did not run or did not count (no pictures, the agent failed,
	// its fix did not build); "" when it ran.
	Note string `json:"note,omitempty"`
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

// Of returns the report res carries; a result without one, or whose details do not decode,
// has the zero report.
func Of(res broker.Result) Report {
	var r Report
	if len(res.Details) > 0 {
		_ = json.Unmarshal(res.Details, &r)
	}
	return r
}

// Encode returns r as a result's details; nil for the zero report (left out of the result).
func (r Report) Encode() json.RawMessage {
	raw, err := json.Marshal(r)
	if err != nil || string(raw) == "{}" {
		return nil
	}
	return raw
}
