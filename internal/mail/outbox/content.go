package outbox

import (
	"fmt"
	"strings"
	"time"
)

// block is one piece of a reply's body, rendered once as text and once as HTML, so the copy
// lives in one place.
type block struct {
	Kind  string // "p", "list", "pre" or "links"
	Title string // heading of a list or pre block
	Text  string // paragraph or preformatted text
	Items []string
	Links []link
}

// link is a labelled URL.
type link struct{ Label, URL string }

// Lines splits a paragraph into its lines (for <br> in HTML).
func (b block) Lines() []string { return strings.Split(b.Text, "\n") }

func para(format string, args ...any) block {
	return block{Kind: "p", Text: fmt.Sprintf(format, args...)}
}

// content is the body of a reply: its blocks and a closing line.
type content struct {
	Blocks []block
	Footer string
}

// add appends b unless it is empty.
func (c *content) add(b block) {
	if strings.TrimSpace(b.Text) != "" || len(b.Items) > 0 || len(b.Links) > 0 {
		c.Blocks = append(c.Blocks, b)
	}
}

// addPara appends a paragraph "prefix text" when text is not empty.
func (c *content) addPara(prefix, text string) {
	if text = strings.TrimSpace(text); text != "" {
		c.add(para("%s%s", prefix, text))
	}
}

// addJob appends the job link.
func (c *content) addJob(label, url string) {
	if url != "" {
		c.add(block{Kind: "links", Links: []link{{label, url}}})
	}
}

const (
	footerReply = "Reply to this email to make more changes. — webordinary"
	footerAuto  = "This is an automatic reply from webordinary."
)

// bodyOf returns the copy for the reply's kind.
func bodyOf(r Reply) content {
	c := kindBody(r)
	if r.Understood != "" && r.Kind != Refused && r.Kind != RateLimited {
		c.add(understood(r))
	}
	return c
}

// understood quotes the instruction back as it was read.
func understood(r Reply) block {
	title := "I read your request as:"
	if r.Guessed {
		title = "I wasn't sure which part of your email was new, so I read your request as:"
	}
	return block{Kind: "pre", Title: title, Text: r.Understood}
}

// kindBody returns the copy particular to the reply's kind.
func kindBody(r Reply) content {
	switch r.Kind {
	case Done:
		return doneBody(r)
	case Failed:
		return failedBody(r)
	case Interrupted:
		return interruptedBody(r)
	case Dead:
		return deadBody(r)
	case Refused:
		return refusedBody(r)
	case RateLimited:
		return rateLimitedBody(r)
	default:
		return receivedBody(r)
	}
}

func doneBody(r Reply) content {
	c := content{Footer: footerReply}
	c.add(para("Done! Your edit is ready to look at."))
	c.addPara("", r.Summary)
	c.add(block{Kind: "links", Links: previewLinks(r.PreviewURLs)})
	c.add(block{Kind: "list", Title: "Files changed", Items: fileItems(r.Files)})
	c.add(block{Kind: "pre", Text: r.Diffstat})
	c.addPara("", details(r))
	c.addJob("Job", r.JobURL)
	return c
}

func failedBody(r Reply) content {
	c := content{Footer: "Reply to this email to try again. — webordinary"}
	a := adviceFor(r)
	c.add(para("Sorry, I couldn't finish this edit."))
	c.add(para("%s", a.what))
	if a.operator {
		c.add(para("%s", operatorTold))
	}
	c.addPara("What to do: ", a.todo)
	c.addJob("Details for the site's operator", r.JobURL)
	return c
}

func interruptedBody(r Reply) content {
	c := content{Footer: footerAuto}
	c.add(para("A newer message took over, so I stopped working on this one."))
	if r.Branch != "" {
		c.add(para("Partial work was saved on %s.", r.Branch))
	}
	c.addPara("So far: ", r.Summary)
	c.addJob("Job", r.JobURL)
	return c
}

func deadBody(r Reply) content {
	c := content{Footer: "Reply to this email to try again. — webordinary"}
	a := adviceFor(r)
	c.add(para("Sorry, I made %s and it kept failing, so I've stopped trying.", attempts(r.Attempts)))
	c.add(para("%s", a.what))
	c.add(para("%s", operatorTold))
	c.addPara("What to do: ", a.todo)
	c.addJob("Details for the site's operator", r.JobURL)
	return c
}

func refusedBody(r Reply) content {
	c := content{Footer: footerAuto}
	c.add(para("I didn't act on your message."))
	c.addPara("Why: ", r.Error)
	c.addPara("What to do: ", r.Hint)
	return c
}

func rateLimitedBody(r Reply) content {
	c := content{Footer: footerAuto}
	c.add(para("Many instructions arrived from you in a short time, so I didn't act on this one."))
	c.add(para("Please send it again %s.", retryWhen(r.RetryAfter)))
	return c
}

func receivedBody(r Reply) content {
	c := content{Footer: footerAuto}
	c.add(para("Got it! I'm working on your edit and will reply here when it's done."))
	c.addJob("Follow along", r.JobURL)
	return c
}

// previewLinks labels the thread's preview first, then any others.
func previewLinks(urls []string) []link {
	var out []link
	for i, u := range urls {
		label := "Preview"
		if i > 0 {
			label = fmt.Sprintf("Preview %d", i+1)
		}
		out = append(out, link{label, u})
	}
	return out
}

// fileItems renders files as "M path".
func fileItems(files []File) []string {
	out := make([]string, 0, len(files))
	for _, f := range files {
		out = append(out, strings.ToUpper(f.Status)+" "+f.Path)
	}
	return out
}

// details is the line with branch, commit, duration and cost, or "" if none is known.
func details(r Reply) string {
	var parts []string
	if r.Branch != "" {
		parts = append(parts, "Branch "+r.Branch)
	}
	if r.Commit != "" {
		parts = append(parts, "commit "+shortCommit(r.Commit))
	}
	if r.Duration > 0 {
		parts = append(parts, "took "+r.Duration.Round(time.Second).String())
	}
	if r.CostUSD > 0 {
		parts = append(parts, fmt.Sprintf("cost $%.2f", r.CostUSD))
	}
	if len(parts) == 0 {
		return ""
	}
	s := strings.Join(parts, ", ") + "."
	return strings.ToUpper(s[:1]) + s[1:]
}

func shortCommit(c string) string {
	if len(c) > 7 {
		return c[:7]
	}
	return c
}

func attempts(n int) string {
	switch {
	case n <= 0:
		return "several attempts"
	case n == 1:
		return "1 attempt"
	default:
		return fmt.Sprintf("%d attempts", n)
	}
}

// retryWhen says when to try again: "in about 5 minutes", or "in a little while".
func retryWhen(d time.Duration) string {
	if d <= 0 {
		return "in a little while"
	}
	return "in about " + humanDuration(d)
}

// humanDuration rounds d to whole seconds, minutes or hours.
func humanDuration(d time.Duration) string {
	unit, name := time.Hour, "hour"
	switch {
	case d < time.Minute:
		unit, name = time.Second, "second"
	case d < time.Hour:
		unit, name = time.Minute, "minute"
	}
	n := int((d + unit/2) / unit)
	if n == 1 {
		return "1 " + name
	}
	return fmt.Sprintf("%d %ss", n, name)
}
