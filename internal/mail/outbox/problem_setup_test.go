package outbox

import (
	"strings"
	"testing"
)

// TestSetupProblemTellsOwnerItIsLookedAt: a failure of the machine's setup is the operator's:
// the owner reads it is being looked at and not to rephrase, and never the operator's detail.
func TestSetupProblemTellsOwnerItIsLookedAt(t *testing.T) {
	t.Parallel()
	errText := "permanent failure: setup problem: the command agent failed for a reason of this machine, not of the instruction: " +
		"a program it runs was not found (exit status 127): /bin/sh: 1: /srv/edit.sh: not found (HTTP 503); operator: add /srv to sandbox.read_only"
	p := ProblemOf(errText)
	if p != ProblemSetup || !p.Operators() {
		t.Fatalf("ProblemOf = %q; want %q, the operator's", p, ProblemSetup)
	}
	r := sampleReply()
	r.Kind, r.Error, r.Problem = Failed, errText, p
	msg, err := Compose(r, newClock().Now())
	if err != nil {
		t.Fatal(err)
	}
	text := parse(t, msg).Text
	for _, w := range []string{"not set up right", "don't need to change or rephrase anything", "being looked at", "have been told"} {
		if !strings.Contains(text, w) {
			t.Errorf("reply lacks %q:\n%s", w, text)
		}
	}
	for _, w := range []string{"differently", "/srv", "sandbox.read_only", "exit status"} {
		if strings.Contains(text, w) {
			t.Errorf("reply says %q:\n%s", w, text)
		}
	}
}
