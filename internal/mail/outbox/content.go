package outbox

import (
	"fmt"
	"strings"
	"time"
)

// block is one piece of a reply's body, rendered once as text and once as HTML, so the copy
// lives in one place.
type block struct {
	Kind   string // "p", "list", "pre" or "links"
	Title  string // heading of a list or pre block
	Text   string // paragraph or preformatted text
	Items  []string
	Links  []link
	Images []Image // Kind "images"
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
	if strings.TrimSpace(b.Text) != "" || len(b.Items) > 0 || len(b.Links) > 0 || len(b.Images) > 0 {
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
	if r.Understood != "" && r.Kind != Refused && r.Kind != Held {
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
	case Held:
		return heldBody(r)
	case Published:
		return publishedBody(r)
	default:
		return receivedBody(r)
	}
}

func doneBody(r Reply) content {
	c := content{Footer: footerReply}
	c.add(para("Done! Your edit is ready to look at."))
	if r.Continued > 0 {
		c.add(para("Your earlier message on this thread, which this one interrupted, was taken into account too."))
	}
	c.addPara("", r.Summary)
	c.add(block{Kind: "images", Images: r.Images})
	c.add(block{Kind: "links", Links: previewLinks(r.PreviewURLs)})
	c.add(block{Kind: "list", Title: "Files changed", Items: fileItems(r.Files)})
	c.add(block{Kind: "pre", Text: r.Diffstat})
	c.addPara("", details(r))
	if r.Publishable {
		c.add(para("Happy with it? Reply \"publish\" to this email to put it live."))
		c.add(block{Kind: "links", Links: publishLink(r.PublishURL)})
	}
	c.addJob("Job", r.JobURL)
	return c
}

func publishLink(url string) []link {
	if url == "" {
		return nil
	}
	return []link{{"Publish now", url}}
}

// publishedBody: the summary says what went live (or was taken back) and where.
func publishedBody(r Reply) content {
	c := content{Footer: "Reply \"undo\" to this email to take the last publish back. — webordinary"}
	if r.Undone {
		c.Footer = footerReply
	}
	c.addPara("", r.Summary)
	if r.LiveURL != "" {
		c.add(block{Kind: "links", Links: []link{{"Live site", r.LiveURL}}})
	}
	c.add(block{Kind: "list", Title: "Files changed on the live site", Items: fileItems(r.Files)})
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

// interruptedBody says who stopped the job and whether anything it did was saved: only a
// commit means saved work.
func interruptedBody(r Reply) content {
	c := content{Footer: footerAuto}
	if r.Superseded {
		c.add(para("Your newer message on this thread took over, so I stopped working on this one."))
	} else {
		c.add(para("This edit was stopped before it finished."))
	}
	switch {
	case r.Commit == "":
		c.add(para("I hadn't changed anything yet, so nothing was saved from it."))
	case r.Superseded:
		c.add(para("What I had done so far was saved, and I'm carrying on from there with your newer message."))
	default:
		c.add(para("What I had done so far was saved."))
	}
	if r.Commit != "" {
		c.add(block{Kind: "list", Title: "Files changed so far", Items: fileItems(r.Files)})
		c.addPara("", details(r))
	}
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

// heldBody lists the messages held and says that nothing is lost.
func heldBody(r Reply) content {
	c := content{Footer: footerAuto}
	c.add(para("Many instructions arrived from you in a short time, so I've held %s instead of acting on %s right away:",
		plural(len(r.HeldMessages), "message"), pronoun(len(r.HeldMessages))))
	c.add(block{Kind: "list", Items: r.HeldMessages})
	c.add(para("Nothing is lost: the site's operator has been told and can let them through. You don't need to send them again."))
	if !r.HeldUntil.IsZero() {
		c.add(para("Anything else you send before %s will be held too; after that I'll act on new messages as usual.",
			r.HeldUntil.UTC().Format("15:04 MST")))
	}
	return c
}

// plural is "1 message" or "n messages".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func pronoun(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
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
