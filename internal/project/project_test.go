package project_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/project"
)

// TestCheckTurn: off unless set, kept in the record, refused for a command agent.
func TestCheckTurn(t *testing.T) {
	t.Parallel()
	p := project.Project{ID: "site", RepoURL: "/srv/site.git"}.WithDefaults()
	if p.CheckTurn {
		t.Fatal("the check turn is on by default")
	}
	p.CheckTurn = true
	data, _ := json.Marshal(p)
	var back project.Project
	if err := json.Unmarshal(data, &back); err != nil || !back.CheckTurn || !strings.Contains(string(data), `"checkTurn":true`) {
		t.Fatalf("record %s: %+v %v", data, back, err)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("claude with the check turn: %v", err)
	}
	p.Agent = project.AgentSpec{Kind: "command", Command: "true"}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "check turn needs an agent that can look at pictures") {
		t.Fatalf("command agent with the check turn: %v", err)
	}
}

// TestJobLimits: kept in the record, checked when the project is saved.
func TestJobLimits(t *testing.T) {
	t.Parallel()
	p := project.Project{ID: "site", RepoURL: "/srv/site.git", JobLimits: "mem=4GiB,procs=512"}.WithDefaults()
	if err := p.Validate(); err != nil {
		t.Fatalf("valid limits: %v", err)
	}
	data, _ := json.Marshal(p)
	if !strings.Contains(string(data), `"jobLimits":"mem=4GiB,procs=512"`) {
		t.Fatalf("record %s", data)
	}
	p.JobLimits = "mem=4"
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "mem=4: too small") {
		t.Fatalf("limits too small: %v", err)
	}
}

// TestRepoURLCarriesNoCredentials: a token in the repository's URL would sit in the
// workspace's git config, which every job reads; it is refused with the way to give it.
func TestRepoURLCarriesNoCredentials(t *testing.T) {
	t.Parallel()
	for _, repo := range []string{"https://bot:ghp_secret@github.com/acme/site.git", "http://user@git.example/site.git"} {
		p := project.Project{ID: "site", RepoURL: repo}.WithDefaults()
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "WO_GIT_TOKEN") {
			t.Errorf("%s: %v, want a refusal naming WO_GIT_TOKEN", repo, err)
		}
	}
	for _, repo := range []string{"https://github.com/acme/site.git", "git@github.com:acme/site.git", "ssh://git@host/site.git", "/srv/site.git"} {
		if err := (project.Project{ID: "site", RepoURL: repo}.WithDefaults()).Validate(); err != nil {
			t.Errorf("%s: %v", repo, err)
		}
	}
}
