package outbox

import (
	"regexp"
	"strings"
)

// httpBusy matches the HTTP statuses a model API answers when it is busy or down.
var httpBusy = regexp.MustCompile(`\b(429|529|502|503)\b`)

// Problem is what went wrong with a job, in the classes a site owner is told about. The
// operator's detail (the error, the output) stays on the job page, the dashboard and the logs.
type Problem string

// Problems. Those marked operator are the operator's to fix: the owner is told so.
const (
	ProblemUnknown Problem = ""        // the agent or the pipeline failed for a reason not known here
	ProblemSite    Problem = "site"    // the site's files could not be fetched (operator)
	ProblemAgent   Problem = "agent"   // the editing assistant stopped with an error
	ProblemBuild   Problem = "build"   // the site did not build with the change
	ProblemSave    Problem = "save"    // the change could not be saved back to the site (operator)
	ProblemTimeout Problem = "timeout" // the edit took longer than allowed
	ProblemModel   Problem = "model"   // the AI service was unavailable (operator)
	ProblemSize    Problem = "size"    // an attachment or the message was too large
	ProblemSetup   Problem = "setup"   // the machine lacks something the agent needs: retrying cannot help (operator)
	ProblemLimit   Problem = "limit"   // the job went over its memory, process, CPU or disk limit (operator)
	ProblemBudget  Problem = "budget"  // the agent's model calls reached the job's budget (operator)
)

// problemWords are the (lower-case) words of an error that put it in a class, checked in order.
var problemWords = []struct {
	p     Problem
	words []string
}{
	{ProblemLimit, []string{"--job-limits"}},      // sandbox.LimitError says how to raise the limit
	{ProblemBudget, []string{"--max-budget-usd"}}, // the pipeline's budget error says how to raise it
	{ProblemModel, []string{"model service", "overloaded", "rate limit", "rate_limit", "too many requests", "service unavailable", "no such host", "connection refused", "connection reset"}},
	{ProblemTimeout, []string{"limit:", "deadline exceeded", "timed out", "timeout"}},
	{ProblemSave, []string{"git push", "push:", "push rejected"}},
	{ProblemSite, []string{"workspace:", "git clone", "git fetch", "repository"}},
	{ProblemSize, []string{"too large", "bytes; this project takes at most"}},
	{ProblemBuild, []string{"build"}},
	{ProblemAgent, []string{"agent"}},
}

// ProblemOf classifies a job's error text.
func ProblemOf(errText string) Problem {
	e := strings.ToLower(errText)
	if strings.Contains(e, "setup problem") { // first: its detail may quote anything
		return ProblemSetup
	}
	if httpBusy.MatchString(e) {
		return ProblemModel
	}
	for _, pw := range problemWords {
		for _, w := range pw.words {
			if strings.Contains(e, w) {
				return pw.p
			}
		}
	}
	return ProblemUnknown
}

// advice is what a site owner reads about a problem: what happened, and what to do.
type advice struct {
	what, todo string
	operator   bool // the operator's to fix: they have been told
}

var problemAdvice = map[Problem]advice{
	ProblemUnknown: {"Something went wrong while I was making your edit, and it was not finished.",
		"You can reply to this email to try again.", false},
	ProblemSite: {"I couldn't open your site's files, so I couldn't make the edit. This is a problem on our side, not with your request.",
		"You don't need to change anything. Once it is fixed, reply to this email to try again.", true},
	ProblemAgent: {"The assistant that makes the edits stopped with an error before it finished. Nothing on your site was changed.",
		"Reply to this email to try again. Describing the change a little differently sometimes helps.", false},
	ProblemBuild: {"I made the change, but your site no longer built with it, so I didn't publish a preview.",
		"Reply with more detail or a simpler version of the change and I'll try again.", false},
	ProblemSave: {"I made the change but couldn't save it to your site. This is a problem on our side, not with your request.",
		"You don't need to change anything. Once it is fixed, reply to this email to try again.", true},
	ProblemTimeout: {"The edit took longer than allowed, so I stopped it. Nothing on your site was changed.",
		"Reply with a smaller change, or split it into steps, and I'll try again.", false},
	ProblemModel: {"The AI service I use to make edits was unavailable for too long, so I couldn't make this edit. Nothing on your site was changed.",
		"Please reply to this email to try again a little later.", true},
	ProblemSetup: {"I couldn't make your edit because something on our side is not set up right. This is not a problem with your request, and nothing on your site was changed.",
		"You don't need to change or rephrase anything: it is being looked at. Once it is fixed, reply to this email to try again.", true},
	ProblemLimit: {"Your edit needed more memory, processes or disk space than this service allows for one edit, so I stopped it. Nothing on your site was changed.",
		"A smaller change may fit; otherwise, once the limit is raised, reply to this email to try again.", true},
	ProblemBudget: {"Your edit needed more of the AI service than this site allows for one edit, so I stopped it. Nothing on your site was changed.",
		"A smaller change, or the change in steps, may fit; otherwise, once the allowance is raised, reply to this email to try again.", true},
	ProblemSize: {"Your email or one of its attachments was too large for me to use.",
		"Send smaller files (or fewer at once) and I'll try again.", false},
}

// Operators reports whether the problem is the operator's to fix (the owner is told they have
// been told).
func (p Problem) Operators() bool { return problemAdvice[p].operator }

// adviceFor returns the owner's copy for the reply's problem.
func adviceFor(r Reply) advice {
	if a, ok := problemAdvice[r.Problem]; ok {
		return a
	}
	return problemAdvice[ProblemUnknown]
}

const operatorTold = "The people who run this service have been told."
