package outbox

import "github.com/webordinary/webordinary/internal/failure"

// advice is what a site owner reads about a problem: what happened, and what to do.
// Whether it is the operator's to fix is the kind's (failure.Kind.Operators).
type advice struct{ what, todo string }

var problemAdvice = map[failure.Kind]advice{
	failure.Unknown: {"Something went wrong while I was making your edit, and it was not finished.",
		"You can reply to this email to try again."},
	failure.Site: {"I couldn't open your site's files, so I couldn't make the edit. This is a problem on our side, not with your request.",
		"You don't need to change anything. Once it is fixed, reply to this email to try again."},
	failure.Agent: {"The assistant that makes the edits stopped with an error before it finished. Nothing on your site was changed.",
		"Reply to this email to try again. Describing the change a little differently sometimes helps."},
	failure.Build: {"I made the change, but your site no longer built with it, so I didn't publish a preview.",
		"Reply with more detail or a simpler version of the change and I'll try again."},
	failure.Save: {"I made the change but couldn't save it to your site. This is a problem on our side, not with your request.",
		"You don't need to change anything. Once it is fixed, reply to this email to try again."},
	failure.Timeout: {"The edit took longer than allowed, so I stopped it. Nothing on your site was changed.",
		"Reply with a smaller change, or split it into steps, and I'll try again."},
	failure.Model: {"The AI service I use to make edits was unavailable for too long, so I couldn't make this edit. Nothing on your site was changed.",
		"Please reply to this email to try again a little later."},
	failure.Setup: {"I couldn't make your edit because something on our side is not set up right. This is not a problem with your request, and nothing on your site was changed.",
		"You don't need to change or rephrase anything: it is being looked at. Once it is fixed, reply to this email to try again."},
	failure.Limit: {"Your edit needed more memory, processes or disk space than this service allows for one edit, so I stopped it. Nothing on your site was changed.",
		"A smaller change may fit; otherwise, once the limit is raised, reply to this email to try again."},
	failure.Budget: {"Your edit needed more of the AI service than this site allows for one edit, so I stopped it. Nothing on your site was changed.",
		"A smaller change, or the change in steps, may fit; otherwise, once the allowance is raised, reply to this email to try again."},
	failure.Size: {"Your email or one of its attachments was too large for me to use.",
		"Send smaller files (or fewer at once) and I'll try again."},
}

// adviceFor returns the owner's copy for the reply's problem.
func adviceFor(r Reply) advice {
	if a, ok := problemAdvice[r.Problem]; ok {
		return a
	}
	return problemAdvice[failure.Unknown]
}

const operatorTold = "The people who run this service have been told."
