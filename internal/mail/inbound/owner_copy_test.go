package inbound_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/webordinary/webordinary/internal/broker"
	"github.com/webordinary/webordinary/internal/failure"
	"github.com/webordinary/webordinary/internal/pipeline/report"
)

// operatorOnly are what a site owner's email must never show: paths, our variables, commands,
// JSON, stack traces, raw tool output.
var operatorOnly = []string{"/tmp", "/srv", "/home", "WO_", "webordinary ", "{", "}", ".go:", "goroutine",
	"exit status", "npm ERR", "git ", "--sender", "--repo", "fatal:", "node_modules"}

// TestOwnerCopyForEveryFailure drives each failure class to the reply its sender gets and checks
// the reply is written for a site owner: it says what happened and what to do, and that the
// operator has been told when it is theirs to fix, with none of the operator's detail.
func TestOwnerCopyForEveryFailure(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	tests := []struct {
		name     string
		state    broker.State
		kind     failure.Kind // as the result carries it: the error's text never decides
		err      string
		operator bool   // the operator's problem: the owner is told they have been told
		says     string // the kind's own copy
	}{
		{"clone failure", broker.StateFailed, failure.Site, "workspace: git clone /srv/repos/site.git: exit status 128: fatal: repository not found (check the project's --repo and the token in WO_GIT_TOKEN)", true, "couldn't open your site's files"},
		{"agent failure", broker.StateFailed, failure.Agent, `the agent did not succeed: {"type":"result","is_error":true,"result":"tool failed"}`, false, "stopped with an error"},
		{"build failure", broker.StateFailed, failure.Build, "permanent: build: exit status 1\nnpm ERR! missing script: build\n    at /tmp/wo/ws/site/alice/node_modules/x.js:12", false, "no longer built"},
		{"push failure", broker.StateFailed, failure.Save, "workspace: git push origin wo/t1: exit status 1: ! [remote rejected] (pre-receive hook declined)", true, "couldn't save it"},
		{"timeout", broker.StateFailed, failure.Timeout, "the agent was stopped by its time limit: context deadline exceeded", false, "took longer than allowed"},
		{"dead letter", broker.StateDead, failure.Unknown, "panic: runtime error\ngoroutine 7 [running]:\nmain.go:12", true, "was not finished"},
		{"model unavailable", broker.StateFailed, failure.Model, `the agent did not succeed: API Error: 529 {"type":"error","error":{"type":"overloaded_error"}}`, true, "AI service I use"},
		{"setup", broker.StateFailed, failure.Setup, "permanent failure: setup problem: exit status 127: /srv/edit.sh: not found", true, "not set up right"},
		{"limit", broker.StateFailed, failure.Limit, "used more than 2 GiB of memory (limit mem=2GiB)", true, "more memory, processes or disk"},
		{"budget", broker.StateFailed, failure.Budget, "agent: the job's model calls reached its budget, $0.20 of $0.20", true, "more of the AI service"},
		{"size", broker.StateFailed, failure.Size, `attachment "a.jpg" is 99 bytes; this project takes at most 4`, false, "too large for me"},
		{"unknown, whatever its words", broker.StateFailed, failure.Unknown, "build agent push: 429 too many requests", false, "was not finished"},
	}
	for i, tt := range tests {
		id := fmt.Sprintf("c%d@example.com", i)
		rep := f.handle(f.mail("Alice <alice@example.com>", "edit@edit.example.net", id, "", quoted, "example.com"), "alice@example.com")
		if rep.JobID == "" {
			t.Fatalf("%s: no job: %+v", tt.name, rep.Decision)
		}
		res := broker.Result{JobID: rep.JobID, State: tt.state, Error: tt.err, Attempt: 3, OutputTail: tt.err,
			Details: report.Report{Failure: tt.kind}.Encode()}
		if err := f.in.OnResult(ctx, res); err != nil {
			t.Fatal(err)
		}
		text := f.replyTo(id)
		checkOwnerCopy(t, tt.name, text, tt.operator)
		if !strings.Contains(strings.Join(strings.Fields(text), " "), tt.says) {
			t.Errorf("%s: the reply does not say %q:\n%s", tt.name, tt.says, text)
		}
	}

	// Over the limit (the default is 30 instructions an hour per sender) a message is held,
	// and the notice says so and that nothing needs sending again.
	var text string
	for i := range 31 {
		id := fmt.Sprintf("r%d@example.com", i)
		rep := f.handle(f.mail("Alice <alice@example.com>", "edit@edit.example.net", id, "", quoted, "example.com"), "alice@example.com")
		if rep.Decision.Action == "hold" {
			text = f.replyTo(id)
			break
		}
	}
	if text == "" {
		t.Fatal("over limit: nothing held")
	}
	t.Logf("over limit:\n%s", text)
	for _, tok := range operatorOnly {
		if strings.Contains(text, tok) {
			t.Errorf("held notice shows %q:\n%s", tok, text)
		}
	}
	if !strings.Contains(text, "held 1 message") || !strings.Contains(text, "don't need to send them again") {
		t.Errorf("held notice:\n%s", text)
	}

	// An unknown sender (authenticated, not registered) gets a short neutral answer.
	rep := f.handle(f.mail("Carol <carol@example.com>", "edit@edit.example.net", "u@example.com", "", quoted, "example.com"), "carol@example.com")
	if rep.Decision.Action != "refuse" {
		t.Fatalf("unknown sender: %+v", rep.Decision)
	}
	text = f.replyTo("u@example.com")
	checkOwnerCopy(t, "unknown sender", text, false)
	if !strings.Contains(text, "not registered to make changes") {
		t.Errorf("unknown sender: %s", text)
	}
}

// checkOwnerCopy asserts a reply has no operator-only detail and says what to do.
func checkOwnerCopy(t *testing.T, name, text string, operator bool) {
	t.Helper()
	t.Logf("%s:\n%s", name, text)
	for _, tok := range operatorOnly {
		if strings.Contains(text, tok) {
			t.Errorf("%s: owner reply shows %q:\n%s", name, tok, text)
		}
	}
	low := strings.ToLower(text)
	if !strings.Contains(low, "reply to this email") && !strings.Contains(low, "send it again") && !strings.Contains(low, "ask the person") {
		t.Errorf("%s: owner reply does not say what to do:\n%s", name, text)
	}
	if operator != strings.Contains(text, "have been told") {
		t.Errorf("%s: says the operator was told = %v, want %v:\n%s", name, !operator, operator, text)
	}
}

// replyTo waits (up to 10 s) for the reply to the message with Message-ID id and returns its
// text part.
func (f *fixture) replyTo(id string) string {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range f.sent(0) {
			if strings.Contains(m.Header.Get("In-Reply-To"), id) {
				return replyText(f.t, m)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.t.Fatalf("no reply to %s", id)
	return ""
}
